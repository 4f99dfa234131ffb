package main

import (
	"context"
	"errors"
)

func runDev(ctx context.Context, args []string) error {
	return errors.New("not built yet")
}
