package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// readPayload reads --payload: inline JSON, or @file. The payload must be a
// JSON object Courier can fingerprint; a syntax error names its line and
// column.
func readPayload(arg string) (json.RawMessage, error) {
	where, b := "--payload", []byte(arg)
	if name, ok := strings.CutPrefix(arg, "@"); ok {
		var err error
		if b, err = os.ReadFile(name); err != nil {
			return nil, cli.UsageError("--payload %s: %w", arg, err)
		}
		where = "--payload " + arg
	}
	if _, err := opkey.Fingerprint(b); err != nil {
		var syn *json.SyntaxError
		if errors.As(json.Unmarshal(b, new(any)), &syn) {
			line, col := lineCol(b, syn.Offset)
			return nil, cli.UsageError("%s: malformed JSON at line %d, column %d: %v", where, line, col, syn)
		}
		return nil, cli.UsageError("%s: %s", where, strings.TrimPrefix(err.Error(), "payload: "))
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
func checkDestination(file, name string) (destinations.Config, error) {
	if file == "" {
		return destinations.Config{}, nil
	}
	cfg, err := destinations.Load(file)
	if err != nil {
		return cfg, cli.UsageError("%w", err)
	}
	if _, ok := cfg.Destinations[name]; !ok {
		return cfg, cli.UsageError("unknown destination %q: %s defines %s", name, file, strings.Join(cfg.Names(), ", "))
	}
	return cfg, nil
}

// envDestinations names the workers' destinations file when a command's
// --destinations is not given, so that one export serves the worker and
// the operator's commands that read the same file.
const envDestinations = "COURIER_DESTINATIONS"

// envLedger names the outcome ledger when --ledger is not given.
const envLedger = worker.EnvLedger

// ledgerURL is the outcome ledger a command uses: --ledger, else
// $COURIER_LEDGER; empty when neither names one.
func ledgerURL(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv(envLedger)
}

// envLedgerRetention is how long the workers' ledger keeps an outcome, when
// --ledger-retention is not given; courier destination status states it.
const envLedgerRetention = worker.EnvLedgerRetention

// ledgerRetention is --ledger-retention when set (flag non-zero), else
// $COURIER_LEDGER_RETENTION; zero keeps outcomes for ever.
func ledgerRetention(flag time.Duration) (time.Duration, error) {
	d := flag
	if d == 0 {
		if v := os.Getenv(envLedgerRetention); v != "" {
			var err error
			if d, err = time.ParseDuration(v); err != nil {
				return 0, cli.UsageError("%s=%q: %v; use a duration such as 8760h, or 0 to keep outcomes for ever", envLedgerRetention, v, err)
			}
		}
	}
	if d < 0 {
		return 0, cli.UsageError("ledger retention %s: use a positive duration, or 0 to keep outcomes for ever", d)
	}
	return d, nil
}

// destinationsFile is the destinations file a command reads: --destinations
// (flag), else $COURIER_DESTINATIONS; from names which gave it, for
// messages, and both are empty when neither did.
func destinationsFile(flag string) (path, from string) {
	if flag != "" {
		return flag, "--destinations"
	}
	if v := os.Getenv(envDestinations); v != "" {
		return v, envDestinations
	}
	return "", ""
}

// loadDestinations loads the destinations file from named, or says what is
// wrong with it and how to go on.
func loadDestinations(path, from string) (destinations.Config, error) {
	cfg, err := destinations.Load(path)
	if err != nil {
		return cfg, fmt.Errorf("%w\nfix the file %s names, or point %s at the workers' destinations file; "+
			"its format is in docs/destinations.md", err, from, from)
	}
	return cfg, nil
}

// startError maps what starter returns to an exit status.
func startError(err error) error {
	var invalid *starter.InvalidRequestError
	var conflict *starter.ConflictError
	var notAwaiting *starter.NotAwaitingReviewError
	var refused *starter.ReviewRefusedError
	var gateRefused *gateclient.RefusedError
	switch {
	case errors.As(err, &invalid):
		return &cli.ExitError{Code: cli.CodeUsage, Err: err}
	case errors.As(err, &conflict):
		return &cli.ExitError{Code: cli.CodeConflict, Err: err}
	case errors.Is(err, starter.ErrUnknownKey):
		return &cli.ExitError{Code: cli.CodeUnknownKey, Err: fmt.Errorf("%w (check the key: `courier list` shows recent deliveries)", err)}
	case errors.As(err, &notAwaiting), errors.As(err, &refused), errors.As(err, &gateRefused):
		return &cli.ExitError{Code: cli.CodeRefused, Err: err}
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
		return &cli.ExitError{Code: cli.CodeAwaiting, Err: fmt.Errorf("delivery %s is awaiting review%s\n"+
			"check the destination for the effect, then decide one of:\n\n%s",
			st.Key, evidence, workflows.ReviewCommands(st.Key))}
	case workflows.State(workflows.StatusConflict):
		return &cli.ExitError{Code: cli.CodeConflict, Err: fmt.Errorf("conflict: %s", st.Error)}
	case workflows.State(workflows.StatusRejected):
		if !st.LeftNoEffect() {
			return &cli.ExitError{Code: cli.CodeRejected, Err: fmt.Errorf("rejected: %s; %s", st.Error, mayExist)}
		}
		return &cli.ExitError{Code: cli.CodeRejected, Err: fmt.Errorf("rejected: %s", st.Error)}
	case workflows.State(workflows.StatusAttemptLimit), workflows.State(workflows.StatusAbandoned):
		effect := "nothing it sent can have applied"
		if !st.LeftNoEffect() {
			effect = mayExist
		}
		return &cli.ExitError{Code: cli.CodeNotDelivered, Err: fmt.Errorf("not delivered (%s): %s; %s", st.State, st.Error, effect)}
	case workflows.State(workflows.StatusCanceled), workflows.State(workflows.StatusTerminated), workflows.State(workflows.StatusTimedOut):
		return &cli.ExitError{Code: cli.CodeStopped, Err: stopped(st)}
	}
	return &cli.ExitError{Code: cli.CodeError, Err: fmt.Errorf("delivery %s is %s", st.Key, st.State)}
}

// mayExist is what a delivery that ended without a confirmed effect,
// where one may exist (workflows.ErrUnconfirmed), leaves its reader to do.
const mayExist = "an effect may exist at the destination (it ended unconfirmed): check there before acting as if nothing happened"

// stopped says how a delivery stopped before it settled, and how to go on.
func stopped(st workflows.DeliveryStatus) error {
	how := strings.ReplaceAll(string(st.State), "_", " ")
	if e := st.Ended; e != nil {
		how = fmt.Sprintf("%s (run %s, at %s", how, e.RunID, e.At.UTC().Format(time.RFC3339))
		if e.Reason != "" {
			how += ": " + e.Reason
		}
		how += ")"
	} else if st.Error != "" {
		how += ": " + st.Error
	}
	applied := "none of its attempts applied"
	if !st.LeftNoEffectIf(workflows.StatusCanceled) {
		applied = fmt.Sprintf("its %d attempt(s) may have applied: check the destination", len(st.Attempts))
	}
	return fmt.Errorf("delivery %s stopped before it settled: %s; %s.\n"+
		"to go on, deliver the operation again with the same payload: the new run parks for review, naming this run, "+
		"wherever a repeat could apply it twice", st.Key, how, applied)
}
