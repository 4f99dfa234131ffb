// Command courier-lab is Courier's lab: the local dev stack, the sandbox
// destinations, the seed fault cases, the bench and the chaos soak. It runs
// the product's courier binary as its workers and clients, and ships in no
// production image.
package main

import (
	"context"
	"os"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/lab"
)

func main() { cli.Main(newRoot) }

// execute runs the command args name and returns it, with its error.
func execute(ctx context.Context, args []string) (*cobra.Command, error) {
	return cli.Execute(ctx, newRoot(), args)
}

// newRoot is the courier-lab command and its subcommands.
func newRoot() *cobra.Command {
	return cli.NewRoot("courier-lab COMMAND [flags]",
		"Courier's lab: a local stack, sandbox destinations, fault cases, bench and soak",
		"Courier's lab: everything to try, test and measure Courier on one machine.\n"+
			"Its workers and clients are the courier program: the one installed beside\n"+
			"courier-lab, or one built from the checkout. Every command exits 0, 1 or 2.",
		devCommand(), sandboxCommand(), faultlabCommand(), benchCommand(), soakCommand(), issuerCommand(),
	)
}

// courierBinary is the courier program the lab runs (lab.FindCourier);
// one it had to build lives in a temporary folder that done removes.
func courierBinary() (path string, done func(), err error) {
	dir, err := os.MkdirTemp("", "courier-lab-")
	if err != nil {
		return "", nil, err
	}
	done = func() { os.RemoveAll(dir) }
	if path, err = lab.FindCourier(dir); err != nil {
		done()
		return "", nil, err
	}
	return path, done, nil
}
