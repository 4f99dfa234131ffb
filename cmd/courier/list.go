package main

import (
	"context"
	"errors"
)

func runList(ctx context.Context, args []string) error {
	return errors.New("not built yet")
}
