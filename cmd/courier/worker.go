package main

import (
	"context"
	"errors"
)

func runWorker(ctx context.Context, args []string) error {
	return errors.New("not built yet")
}
