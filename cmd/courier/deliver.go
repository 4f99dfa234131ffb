package main

import (
	"context"
	"errors"
)

func runDeliver(ctx context.Context, args []string) error {
	return errors.New("not built yet")
}
