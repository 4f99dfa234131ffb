package main

import (
	"context"
	"errors"
)

func runSandbox(ctx context.Context, args []string) error {
	return errors.New("not built yet")
}
