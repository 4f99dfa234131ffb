package main

import (
	"context"
	"errors"
)

func runSoak(ctx context.Context, args []string) error {
	return errors.New("not built yet")
}
