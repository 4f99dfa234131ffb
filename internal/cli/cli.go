// Package cli is the command framework Courier's two programs share (the
// product's courier and the lab's courier-lab): one exit-status table, one
// help format, one way to name required flags, so both read alike. Only the
// two programs under cmd/ import it.
package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/abde64c9/courier/internal/logging"
)

// Exit statuses, one table for every command, so scripts can tell outcomes
// apart without parsing output. Each command's help lists those it uses.
const (
	CodeOK = iota
	CodeError
	CodeUsage
	CodeConflict
	CodeRejected
	CodeAwaiting
	CodeNotDelivered
	CodeUnknownKey
	CodeRefused
	CodeViolation
	CodeStopped
)

// ExitStatuses are the meanings, as the help prints them.
var ExitStatuses = [...]string{
	CodeOK:           "done (deliver: created, duplicate, delivered_by_review; review accepted; probe passed)",
	CodeError:        "error: the message says what failed, e.g. Temporal unreachable, a transport failure, an inconclusive probe",
	CodeUsage:        "usage: missing or bad flags or arguments, malformed JSON, unknown destination, invalid decision",
	CodeConflict:     "conflict: the operation was started with another payload; nothing was sent",
	CodeRejected:     "rejected: the destination refused the request (probe: refused the probe payload)",
	CodeAwaiting:     "awaiting review: the outcome is unknown and a person must decide",
	CodeNotDelivered: "not delivered: attempt_limit or abandoned; the message says whether an effect may exist",
	CodeUnknownKey:   "unknown key: no delivery has this key",
	CodeRefused:      "refused: the delivery is not awaiting review, the reviewer is not allowed, or the destination's gate refused the change",
	CodeViolation:    "contract violation (probe): the destination does not do what its contract declares",
	CodeStopped:      "stopped: canceled or terminated before it settled; whether an attempt applied is in its attempts and error; deliver again to go on",
}

// BasicExits are the statuses every command can exit with.
var BasicExits = []int{CodeOK, CodeError, CodeUsage}

// ExitError carries a specific exit status out of a command. An empty
// message prints nothing: the command has said it already.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }

func UsageError(format string, args ...any) error {
	return &ExitError{Code: CodeUsage, Err: fmt.Errorf(format, args...)}
}

// exitsKey is the annotation holding the statuses a command exits with.
const exitsKey = "courier-exit-statuses"

// Exits declares the statuses a command exits with, for its help.
func Exits(codes ...int) map[string]string {
	s := make([]string, len(codes))
	for i, c := range codes {
		s[i] = strconv.Itoa(c)
	}
	return map[string]string{exitsKey: strings.Join(s, ",")}
}

// exitHelp is the exit status section of c's help: the statuses c
// declares, or all of them for the root.
func exitHelp(c *cobra.Command) string {
	var b strings.Builder
	for i, meaning := range ExitStatuses {
		if c.HasParent() && !slices.Contains(strings.Split(c.Annotations[exitsKey], ","), strconv.Itoa(i)) {
			continue
		}
		fmt.Fprintf(&b, "  %d  %s\n", i, meaning)
	}
	if b.Len() == 0 {
		return ""
	}
	return "\nexit status:\n" + b.String()
}

// help prints c's help on stderr (stdout carries results): synopsis,
// description, commands, examples, flags and exit statuses.
func Help(c *cobra.Command, _ []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n", c.UseLine())
	if about := strings.TrimSpace(c.Long); about != "" {
		fmt.Fprintf(&b, "\n%s\n", about)
	} else if c.Short != "" {
		fmt.Fprintf(&b, "\n%s.\n", c.Short)
	}
	if c.HasAvailableSubCommands() {
		b.WriteString("\ncommands:\n")
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() || sub.Name() == "help" {
				fmt.Fprintf(&b, "  %-*s  %s\n", sub.NamePadding(), sub.Name(), sub.Short)
			}
		}
	}
	if c.Example != "" {
		fmt.Fprintf(&b, "\nexamples:\n%s\n", strings.TrimRight(c.Example, "\n"))
	}
	if c.HasAvailableLocalFlags() {
		fmt.Fprintf(&b, "\nflags:\n%s", c.LocalFlags().FlagUsages())
	}
	b.WriteString(exitHelp(c))
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nRun '%s COMMAND -h' for a command's flags.\n", c.CommandPath())
	}
	fmt.Fprint(c.ErrOrStderr(), b.String())
}

// FlagError turns pflag's parse errors into usage errors that say where
// the flags are documented.
func FlagError(c *cobra.Command, err error) error {
	var unknown *pflag.NotExistError
	if errors.As(err, &unknown) {
		short, _, _ := strings.Cut(unknown.GetSpecifiedShortnames(), "=")
		switch {
		case short == "":
			// The wording of Go's flag package, which this CLI used before.
			err = fmt.Errorf("flag provided but not defined: -%s", unknown.GetSpecifiedName())
		case c.Flags().Lookup(short) != nil:
			return UsageError("unknown flag -%s: long flags take two dashes, --%s", short, short)
		}
	}
	return UsageError("%v (see %s -h)", err, c.CommandPath())
}

// required marks flags that must not be empty: the help says so, and
// CheckRequired refuses the command without them.
func Required(c *cobra.Command, names ...string) {
	for _, name := range names {
		if err := c.MarkFlagRequired(name); err != nil {
			panic(err) // a flag the command does not have
		}
		c.Flags().Lookup(name).Usage += " (required)"
	}
}

// CheckRequired names every required flag left empty (or blank), what it
// is, and an example of the command.
func CheckRequired(c *cobra.Command, _ []string) error {
	var missing, about []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if _, ok := f.Annotations[cobra.BashCompOneRequiredFlag]; ok && strings.TrimSpace(f.Value.String()) == "" {
			_, usage := pflag.UnquoteUsage(f)
			missing = append(missing, "--"+f.Name)
			about = append(about, fmt.Sprintf("  --%s is required: %s", f.Name, strings.TrimSuffix(usage, " (required)")))
		}
	})
	if len(missing) == 0 {
		return nil
	}
	noun := "flag"
	if len(missing) > 1 {
		noun = "flags"
	}
	msg := fmt.Sprintf("missing %s %s (see %s -h)\n%s", noun, strings.Join(missing, ", "), c.CommandPath(), strings.Join(about, "\n"))
	if ex := firstExample(c); ex != "" {
		msg += "\nfor example:\n  " + ex
	}
	return &ExitError{Code: CodeUsage, Err: errors.New(msg)}
}

// firstExample is the first command line of c's examples.
func firstExample(c *cobra.Command) string {
	for line := range strings.Lines(c.Example) {
		if line = strings.TrimSpace(line); strings.HasPrefix(line, c.Root().Name()+" ") {
			return line
		}
	}
	return ""
}

// NoArgs refuses positional arguments.
func NoArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return UsageError("unexpected argument %q: %s takes flags only (see %s -h)", args[0], c.Name(), c.CommandPath())
	}
	return nil
}

// OneArg takes exactly one positional argument, named what; about says
// what it is.
func OneArg(what, about string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		switch len(args) {
		case 0:
			return UsageError("missing %s: %s (%s)", what, c.UseLine(), about)
		case 1:
			return nil
		}
		return UsageError("one %s expected, got %d arguments: %q", what, len(args), args)
	}
}

// Choices offers values to shell completion for a flag.
func Choices(c *cobra.Command, name string, values ...string) {
	if err := c.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)); err != nil {
		panic(err) // a flag the command does not have
	}
}

// LogFlags are --log-level and, for the long-running services, --log-format.
type LogFlags struct{ level, format string }

func AddLogFlags(c *cobra.Command, withFormat bool) *LogFlags {
	l := &LogFlags{format: "text"}
	c.Flags().StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	Choices(c, "log-level", "debug", "info", "warn", "error")
	if withFormat {
		c.Flags().StringVar(&l.format, "log-format", "text", "log format: text or json")
		Choices(c, "log-format", "text", "json")
	}
	return l
}

// Logger is the logger the flags describe, on stderr.
func (l *LogFlags) Logger() (*slog.Logger, error) {
	logger, err := logging.New(os.Stderr, l.level, l.format)
	if err != nil {
		return nil, &ExitError{Code: CodeUsage, Err: err}
	}
	return logger, nil
}
