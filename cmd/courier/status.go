package main

import (
	"context"
	"errors"
)

func runStatus(ctx context.Context, args []string) error {
	return errors.New("not built yet")
}
