// Command courier runs Courier: the worker, a local dev stack, and the
// commands services and operators use. Flags and wiring only; the logic
// lives in the packages.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	args := os.Args[1:]

	cmd, err := execute(ctx, args)
	os.Exit(report(cmd.CommandPath(), err))
}

// report prints err, if it says anything, and returns the exit status.
func report(command string, err error) int {
	if err == nil {
		return codeOK
	}
	code := codeError
	var e *exitError
	if errors.As(err, &e) {
		code = e.code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(os.Stderr, "%s: %s\n", command, msg)
	}
	return code
}

// execute runs the command args name and returns it, with its error.
func execute(ctx context.Context, args []string) (*cobra.Command, error) {
	root := newRoot()
	root.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
	return root.ExecuteContextC(ctx)
}

// newRoot is the courier command and its subcommands.
func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "courier COMMAND [flags]",
		Short: "deliver business operations exactly once in effect, on Temporal",
		Long: "Courier delivers business operations to destinations exactly once in effect, on Temporal.\n" +
			"Every command finds Temporal through Temporal's standard client environment\n" +
			"(TEMPORAL_ADDRESS, default localhost:7233; TEMPORAL_NAMESPACE; TLS and API key).\n" +
			"Results go to stdout, messages and help to stderr. Every command exits 0, 1 or 2;\n" +
			"the others are the delivery commands' outcomes, listed in each one's help.",
		Args:                       cobra.ArbitraryArgs,
		RunE:                       unknownCommand,
		PersistentPreRunE:          checkRequired,
		SilenceErrors:              true,
		SilenceUsage:               true,
		DisableFlagsInUseLine:      true,
		SuggestionsMinimumDistance: 2,
	}
	root.AddCommand(
		workerCommand(), devCommand(), sandboxCommand(),
		deliverCommand(), reviewCommand(), statusCommand(), listCommand(), destinationCommand(), probeCommand(),
		faultlabCommand(), benchCommand(), soakCommand(), codecServerCommand(),
	)
	root.SetHelpFunc(help)
	root.SetUsageFunc(func(c *cobra.Command) error { help(c, nil); return nil }) // one format
	root.SetFlagErrorFunc(flagError)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		c.Flags().SortFlags = false    // in the order declared: the required ones first
		c.DisableFlagsInUseLine = true // each Use says which flags it takes
		switch c.Name() {
		case "help":
			c.Short = "print a command's help"
		case "completion":
			c.Short = "print the shell completion script for bash, zsh, fish or powershell"
		}
	}
	return root
}

// unknownCommand runs for `courier` alone or with a word that is no
// command: both are usage errors.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		help(c, args)
		return &exitError{code: codeUsage, err: errors.New("")}
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return usageError("%s: run 'courier -h' for the commands", msg)
}
