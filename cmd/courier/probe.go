package main

import (
	"context"
	"errors"
)

func runProbe(ctx context.Context, args []string) error {
	return errors.New("not built yet")
}
