// Command courier is Courier's product: the worker and the commands
// services and operators use. Flags and wiring only; the logic lives in the
// packages. The lab (dev stack, sandbox, fault lab, bench, soak) is a
// program of its own, courier-lab.
package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
)

func main() { cli.Main(newRoot) }

// execute runs the command args name and returns it, with its error.
func execute(ctx context.Context, args []string) (*cobra.Command, error) {
	return cli.Execute(ctx, newRoot(), args)
}

// newRoot is the courier command and its subcommands.
func newRoot() *cobra.Command {
	return cli.NewRoot("courier COMMAND [flags]",
		"deliver business operations exactly once in effect, on Temporal",
		"Courier delivers business operations to destinations exactly once in effect, on Temporal.\n"+
			"Every command finds Temporal through Temporal's standard client environment\n"+
			"(TEMPORAL_ADDRESS, default localhost:7233; TEMPORAL_NAMESPACE; TLS and API key).\n"+
			"Results go to stdout, messages and help to stderr. Every command exits 0, 1 or 2;\n"+
			"the others are the delivery commands' outcomes, listed in each one's help.",
		workerCommand(), deliverCommand(), reviewCommand(), statusCommand(), listCommand(),
		destinationCommand(), probeCommand(), codecServerCommand(), ledgerCommand(), apiCommand(),
	)
}
