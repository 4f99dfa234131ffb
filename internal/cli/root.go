package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Main runs the program root builds with os.Args and exits with the
// status its command returned. Ctrl-C and SIGTERM cancel the context.
func Main(root func() *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd, err := Execute(ctx, root(), os.Args[1:])
	stop()
	os.Exit(Report(cmd.CommandPath(), err))
}

// Execute runs the command args name under root and returns it, with its
// error.
func Execute(ctx context.Context, root *cobra.Command, args []string) (*cobra.Command, error) {
	root.SetArgs(append([]string{}, args...)) // never nil: cobra would read os.Args
	return root.ExecuteContextC(ctx)
}

// Report prints err, if it says anything, and returns the exit status.
func Report(command string, err error) int {
	if err == nil {
		return CodeOK
	}
	code := CodeError
	var e *ExitError
	if errors.As(err, &e) {
		code = e.Code
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintf(os.Stderr, "%s: %s\n", command, msg)
	}
	return code
}

// NewRoot is a program's root command over its subcommands, with the
// shared help format, flag errors, required-flag check and exit statuses.
func NewRoot(use, short, long string, commands ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:                        use,
		Short:                      short,
		Long:                       long,
		Args:                       cobra.ArbitraryArgs,
		RunE:                       unknownCommand,
		PersistentPreRunE:          CheckRequired,
		SilenceErrors:              true,
		SilenceUsage:               true,
		DisableFlagsInUseLine:      true,
		SuggestionsMinimumDistance: 2,
	}
	root.AddCommand(commands...)
	root.SetHelpFunc(Help)
	root.SetUsageFunc(func(c *cobra.Command) error { Help(c, nil); return nil }) // one format
	root.SetFlagErrorFunc(FlagError)
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

// unknownCommand runs for the program alone or with a word that is no
// command: both are usage errors.
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		Help(c, args)
		return &ExitError{Code: CodeUsage, Err: errors.New("")}
	}
	msg := fmt.Sprintf("unknown command %q", args[0])
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return UsageError("%s: run '%s -h' for the commands", msg, c.Root().Name())
}

// StderrLogger keeps the SDK's logs off stdout, which carries the result.
func StderrLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// PrintJSON writes v as indented JSON, as every command prints results.
func PrintJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
