package main

import (
	"context"
	"errors"
)

func runReview(ctx context.Context, args []string) error {
	return errors.New("not built yet")
}
