package main

import "context"

// runWorker runs `courier worker` as the binary would, returning its error
// instead of printing it.
func runWorker(ctx context.Context, args []string) error {
	_, err := execute(ctx, append([]string{"worker"}, args...))
	return err
}
