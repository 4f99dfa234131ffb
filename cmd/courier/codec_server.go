package main

import (
	"context"
	"errors"
)

func runCodecServer(ctx context.Context, args []string) error {
	return errors.New("not built yet")
}
