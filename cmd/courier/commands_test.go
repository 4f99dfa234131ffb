package main

import (
	"bytes"
	"context"

	"github.com/abde64c9/courier/internal/cli"
)

// runWorker runs `courier worker` as the binary would, returning its error
// instead of printing it.
func runWorker(ctx context.Context, args []string) error {
	_, err := execute(ctx, append([]string{"worker"}, args...))
	return err
}

// runCourier runs courier with args as the binary would, returning what it
// printed and its error instead of printing it.
func runCourier(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	root := newRoot()
	var out, errs bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errs)
	_, err = cli.Execute(ctx, root, args)
	return out.String(), errs.String(), err
}
