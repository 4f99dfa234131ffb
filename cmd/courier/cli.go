package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// Exit statuses of the delivery commands (deliver, review, status, list,
// probe), so scripts can tell outcomes apart without parsing output.
const (
	codeOK           = 0 // created, duplicate, delivered_by_review; a review accepted; a probe that passed
	codeError        = 1 // Temporal unreachable, a transport failure, an inconclusive probe
	codeUsage        = 2 // missing or bad flags, malformed JSON, unknown destination, invalid decision
	codeConflict     = 3 // the operation was started before with another payload: nothing sent
	codeRejected     = 4 // the destination refused the request (or the probe payload)
	codeAwaiting     = 5 // the delivery stopped for a human review
	codeNotDelivered = 6 // attempt_limit or abandoned: no effect was delivered
	codeUnknownKey   = 7 // no delivery has this key
	codeRefused      = 8 // the review was refused: not awaiting review, or not an allowed reviewer
	codeViolation    = 9 // the probe found the destination breaks its declared contract
)

// exitCodesHelp is the table printed in each command's help.
const exitCodesHelp = `exit status:
  0  done: created, duplicate, delivered_by_review; review accepted; probe passed
  1  error: Temporal unreachable, transport failure, probe inconclusive
  2  usage: missing or bad flags, malformed JSON, unknown destination, invalid decision
  3  conflict: the operation was started with another payload; nothing was sent
  4  rejected: the destination refused the request (probe: refused the probe payload)
  5  awaiting review: the outcome is unknown and a person must decide
  6  not delivered: attempt_limit or abandoned
  7  unknown key: no delivery has this key
  8  review refused: the delivery is not awaiting review, or the reviewer is not allowed
  9  contract violation (probe): the destination does not do what its contract declares
`

func usageError(format string, args ...any) error {
	return &exitError{code: codeUsage, err: fmt.Errorf(format, args...)}
}

// newFlagSet returns a flag set whose -h prints the synopsis, the flags and
// the exit statuses.
func newFlagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "usage: courier %s %s\n\n%s\n", name, synopsis, about)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprint(out, "\nflags:\n")
			fs.PrintDefaults()
		}
		fmt.Fprint(out, "\n"+exitCodesHelp)
	}
	return fs
}

// parseFlags parses flags and positional arguments in any order (the flag
// package stops at the first positional one). -h prints help and exits 0.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &exitError{code: codeOK, err: errors.New("")}
			}
			// The flag package has printed the error and the usage.
			return nil, &exitError{code: codeUsage, err: errors.New("")}
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// requireFlags names every required flag left empty.
func requireFlags(flags ...[2]string) error {
	var missing []string
	for _, f := range flags {
		if strings.TrimSpace(f[1]) == "" {
			missing = append(missing, "--"+f[0])
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return usageError("missing flag %s (see -h)", missing[0])
	}
	return usageError("missing flags %s (see -h)", strings.Join(missing, ", "))
}

// readPayload reads --payload: inline JSON, or @file. The payload must be a
// JSON object Courier can fingerprint; a syntax error names its line and
// column.
func readPayload(arg string) (json.RawMessage, error) {
	where, b := "--payload", []byte(arg)
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if b, err = os.ReadFile(name); err != nil {
			return nil, usageError("--payload %s: %w", arg, err)
		}
		where = "--payload " + arg
	}
	if _, err := opkey.Fingerprint(b); err != nil {
		var syn *json.SyntaxError
		if errors.As(json.Unmarshal(b, new(any)), &syn) {
			line, col := lineCol(b, syn.Offset)
			return nil, usageError("%s: malformed JSON at line %d, column %d: %v", where, line, col, syn)
		}
		return nil, usageError("%s: %s", where, strings.TrimPrefix(err.Error(), "payload: "))
	}
	return b, nil
}

// lineCol turns the offset of a JSON syntax error (the byte after the bad
// one) into the 1-based line and column of the bad byte.
func lineCol(b []byte, offset int64) (line, col int) {
	offset = max(0, min(offset-1, int64(len(b))))
	before := b[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	return line, int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
}

// checkDestination loads the destinations file, when one is given, and
// checks name is in it, before anything is sent.
func checkDestination(file, name string) (contract.Config, error) {
	if file == "" {
		return contract.Config{}, nil
	}
	cfg, err := contract.Load(file)
	if err != nil {
		return cfg, usageError("%w", err)
	}
	if _, ok := cfg.Destinations[name]; !ok {
		return cfg, usageError("unknown destination %q: %s defines %s", name, file, strings.Join(cfg.Names(), ", "))
	}
	return cfg, nil
}

// stderrLogger keeps the SDK's logs off stdout, which carries the result.
func stderrLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// connect dials Temporal with the standard client environment (see dial)
// and wraps the client for deliveries.
func connect(ctx context.Context) (*starter.Client, func(), error) {
	logger := stderrLogger()
	c, err := dial(ctx, logger)
	if err != nil {
		return nil, nil, err
	}
	return starter.New(c), c.Close, nil
}

// startError maps what starter returns to an exit status.
func startError(err error) error {
	var invalid *starter.InvalidRequestError
	var conflict *starter.ConflictError
	var notAwaiting *starter.NotAwaitingReviewError
	var refused *starter.ReviewRefusedError
	switch {
	case errors.As(err, &invalid):
		return &exitError{code: codeUsage, err: err}
	case errors.As(err, &conflict):
		return &exitError{code: codeConflict, err: err}
	case errors.Is(err, starter.ErrUnknownKey):
		return &exitError{code: codeUnknownKey, err: fmt.Errorf("%w (check the key: `courier list` shows recent deliveries)", err)}
	case errors.As(err, &notAwaiting), errors.As(err, &refused):
		return &exitError{code: codeRefused, err: err}
	}
	return err
}

// outcome maps a delivery's state to an exit status, saying what to do next.
func outcome(st workflows.DeliveryStatus) error {
	switch st.State {
	case workflows.State(workflows.StatusCreated), workflows.State(workflows.StatusDuplicate),
		workflows.State(workflows.StatusDeliveredByReview):
		return nil
	case workflows.StateAwaitingReview:
		evidence := ""
		if st.Review != nil {
			evidence = ": " + st.Review.Evidence
		}
		return &exitError{code: codeAwaiting, err: fmt.Errorf("delivery %s is awaiting review%s\n"+
			"check the destination for the effect, then decide:\n"+
			"  courier review %s --decision delivered --resource-id ID --reviewer NAME --note TEXT   (you found it)\n"+
			"  courier review %s --decision retry --reviewer NAME --note TEXT                       (it is not there)\n"+
			"  courier review %s --decision abandon --reviewer NAME --note TEXT                     (give up)",
			st.Key, evidence, st.Key, st.Key, st.Key)}
	case workflows.State(workflows.StatusConflict):
		return &exitError{code: codeConflict, err: fmt.Errorf("conflict: %s", st.Error)}
	case workflows.State(workflows.StatusRejected):
		return &exitError{code: codeRejected, err: fmt.Errorf("rejected: %s", st.Error)}
	case workflows.State(workflows.StatusAttemptLimit), workflows.State(workflows.StatusAbandoned):
		return &exitError{code: codeNotDelivered, err: fmt.Errorf("not delivered (%s): %s", st.State, st.Error)}
	}
	return &exitError{code: codeError, err: fmt.Errorf("delivery %s is %s", st.Key, st.State)}
}
