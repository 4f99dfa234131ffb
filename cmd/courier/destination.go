package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/internal/text"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
)

func destinationCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "destination pause|resume|status",
		Short: "pause, resume and inspect a destination's gate",
		Long: `A destination's gate holds attempts back for every worker: while it is paused by an
operator, or while its circuit breaker (contract.breaker) is open, nothing is sent to it,
and its deliveries wait (state paused or circuit_open) without spending attempts or
deadline. On resume, or when the breaker closes, they are released at the destination's
rate limit. The gate lives in Temporal (workflow destination-NAME): it holds across worker
and server restarts. When the destinations file lists reviewers, only they may pause and
resume (--by); anyone else is refused.`,
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.AddCommand(pauseCommand(), resumeCommand(), destinationStatusCommand())
	return c
}

func pauseCommand() *cobra.Command {
	var r gate.PauseRequest
	var until string
	var sf signFlags
	c := &cobra.Command{
		Use:   "pause NAME --reason TEXT (--by NAME | --key FILE) [--until TIME] [--print]",
		Short: "hold every attempt to a destination until it is resumed",
		Long: `Pauses the destination for every worker. Attempts already under way finish; from the
moment this command returns no new one is sent, and deliveries to it wait as paused.
--until ends the pause by itself, at an RFC 3339 time or after a duration. A gate whose
workflow was terminated or canceled is started again, paused.
Where the destination's reviewers have keys, the pause carries a proof signed with your
key (--key, default $COURIER_REVIEWER_KEY), over the gate's current state: only a
reviewer allowed "pause" may, and the proof is good until the gate changes state or
--ttl passes. --print prints the signed request instead of sending it.`,
		Example: `  courier destination pause legacy --reason "maintenance window" --by alice --until 2h
  courier destination pause legacy --reason "partner outage INC-42" --key ~/.courier/alice.key`,
		Args:        cli.OneArg("NAME", "the destination's name in the destinations file"),
		Annotations: cli.Exits(cli.CodeOK, cli.CodeError, cli.CodeUsage, cli.CodeRefused),
	}
	f := c.Flags()
	f.StringVar(&r.Reason, "reason", "", "why, for the audit trail and every held delivery's details")
	f.StringVar(&r.By, "by", "", "who is pausing, `name` (one of the destinations file's reviewers, when it lists any); with --key, the key's name")
	f.StringVar(&until, "until", "", "end the pause by itself at this `time` (RFC 3339, or a duration such as 2h)")
	sf.add(c, "pause")
	cli.Required(c, "reason")
	c.RunE = func(c *cobra.Command, args []string) error {
		if until != "" {
			t, err := parseUntil(until, time.Now())
			if err != nil {
				return cli.UsageError("--until: %w", err)
			}
			r.Until = t
		}
		signer, err := sf.signer(r.By)
		if err != nil {
			return err
		}
		ctx := c.Context()
		return withStarter(ctx, func(s *starter.Client) error {
			if signer != nil {
				if r, err = s.SignPause(ctx, args[0], r, *signer); err != nil {
					return startError(err)
				}
			}
			if sf.print {
				return printGateUpdate(args[0], gate.UpdatePause, r)
			}
			st, err := s.Pause(ctx, args[0], r)
			if err != nil {
				return startError(err)
			}
			// Workers read the gate at most this old: after it, none sends.
			time.Sleep(gateclient.Fresh)
			who := "--by <YOUR-NAME>"
			if signer != nil {
				who = "--key <YOUR-KEY-FILE>"
			}
			fmt.Fprintf(os.Stderr, "%s paused: no attempt is sent to it now; resume with: courier destination resume %s %s\n", args[0], args[0], who)
			return cli.PrintJSON(os.Stdout, st)
		})
	}
	return c
}

// signFlags sign a pause or resume where the destination's reviewers have
// keys.
type signFlags struct {
	key   string
	ttl   time.Duration
	print bool
}

func (sf *signFlags) add(c *cobra.Command, what string) {
	f := c.Flags()
	f.StringVar(&sf.key, "key", "", "your reviewer key `file` (courier review keygen), to sign the "+what+"; default $"+envReviewerKey)
	f.DurationVar(&sf.ttl, "ttl", starter.DefaultProofTTL, "how long the signed "+what+" stays good, at most 24h")
	f.BoolVar(&sf.print, "print", false, "print the (signed) request as JSON instead of sending it, for the web UI's Send an Update")
	_ = c.MarkFlagFilename("key")
}

// signer is the key to sign with, nil when none is named: then --by says
// who, unverified, as where the reviewers are plain names. A key exported
// in the environment for someone else than --by is left unused, so a
// plain-name change by another name still goes as typed.
func (sf *signFlags) signer(by string) (*starter.Signer, error) {
	signer, err := readSigner(sf.key, sf.ttl)
	switch {
	case err != nil:
		return nil, err
	case signer == nil && by == "":
		return nil, cli.UsageError("--by NAME, or --key FILE where the reviewers have keys: who is changing the gate")
	case signer != nil && by != "" && by != signer.Name && sf.key == "":
		return nil, nil
	case signer != nil && by != "" && by != signer.Name:
		return nil, cli.UsageError("--by %s: the key is %s's; a signed change is by its key's reviewer", by, signer.Name)
	}
	return signer, nil
}

// printGateUpdate prints a gate update's request, and how to send it.
func printGateUpdate(dest, update string, r any) error {
	fmt.Fprintf(os.Stderr, "paste it into Send an Update (update %s) on workflow %s, or: "+
		"temporal workflow update execute -w %s --name %s --input '<it>'\n", update, gate.WorkflowID(dest), gate.WorkflowID(dest), update)
	return cli.PrintJSON(os.Stdout, r)
}

func resumeCommand() *cobra.Command {
	var r gate.ResumeRequest
	var sf signFlags
	c := &cobra.Command{
		Use:   "resume NAME (--by NAME | --key FILE) [--note TEXT] [--print]",
		Short: "resume a paused destination, or close its open breaker, and release its held deliveries",
		Long: `Ends the destination's pause and closes its circuit breaker if it is open or half-open:
an operator's way out of a breaker without waiting for its cool-down and probe. Attempts go
again, and its held deliveries are released at its rate limit. Recorded as a transition by
--by. Refused when it is not paused and its breaker is closed. A gate whose workflow was
terminated or canceled while paused or open is started again, resumed.
Where the destination's reviewers have keys, the resume carries a proof signed with your
key (--key, default $COURIER_REVIEWER_KEY), as for pause; a reviewer allowed "resume" may.`,
		Example: `  courier destination resume legacy --by alice --note "maintenance over"
  courier destination resume legacy --key ~/.courier/alice.key --note "maintenance over" --print`,
		Args:        cli.OneArg("NAME", "the destination's name in the destinations file"),
		Annotations: cli.Exits(cli.CodeOK, cli.CodeError, cli.CodeUsage, cli.CodeRefused),
	}
	c.Flags().StringVar(&r.By, "by", "", "who is resuming, `name` (one of the destinations file's reviewers, when it lists any); with --key, the key's name")
	c.Flags().StringVar(&r.Note, "note", "", "why, for the audit trail")
	sf.add(c, "resume")
	c.RunE = func(c *cobra.Command, args []string) error {
		signer, err := sf.signer(r.By)
		if err != nil {
			return err
		}
		ctx := c.Context()
		return withStarter(ctx, func(s *starter.Client) error {
			if signer != nil {
				if r, err = s.SignResume(ctx, args[0], r, *signer); err != nil {
					return startError(err)
				}
			}
			if sf.print {
				return printGateUpdate(args[0], gate.UpdateResume, r)
			}
			st, err := s.Resume(ctx, args[0], r)
			if err != nil {
				return startError(err)
			}
			fmt.Fprintf(os.Stderr, "%s is %s; held deliveries are released at its rate limit\n", args[0], st.State)
			return cli.PrintJSON(os.Stdout, st)
		})
	}
	return c
}

func destinationStatusCommand() *cobra.Command {
	var asJSON bool
	var destinationsFlag string
	c := &cobra.Command{
		Use:   "status [NAME] [--destinations FILE] [--json]",
		Short: "every destination: dedup, gate, breaker, and its parked, held and retrying deliveries",
		Long: `Lists every destination in the destinations file (--destinations, else
$COURIER_DESTINATIONS: the file the workers read) and every one that has a gate, or NAME
alone: its dedup kind; its gate's state (closed, open, half_open, paused), since when, and
why with who; its breaker (state, and consecutive failures of those that open it, as in
"closed 1/5"); and how many running deliveries wait at it: PARKED for a review
(awaiting_review), HELD by its gate (paused or circuit_open), RETRYING for their next
attempt (retry_wait). The counts come from Temporal's visibility, a moment behind. A
destination that has a gate but is not in the file is marked "not configured". Without a
file, only the destinations that have a gate (paused once, or whose breaker tripped once)
are listed; a file that does not load is refused. A last line states the horizon: how long
a repeated request answers its first outcome ($COURIER_LEDGER and
$COURIER_LEDGER_RETENTION, as the workers read them; without a ledger, the namespace's
retention). The table fits 120 columns, cutting a
long why; --json prints the same, whole, with each gate's transitions and latest attempts.
A gate whose workflow was terminated or canceled while paused (or its breaker open) still
holds its destination, shown as "paused (gate terminated)": resume clears it, pause
restores it, each starting a new gate.`,
		Example: "  export COURIER_DESTINATIONS=destinations.json; courier destination status\n" +
			"  courier destination status --destinations destinations.json --json\n" +
			"  courier destination status legacy",
		Args:        cobra.MaximumNArgs(1),
		Annotations: cli.Exits(cli.BasicExits...),
	}
	c.Flags().StringVar(&destinationsFlag, "destinations", "", "the workers' destinations `file` (JSON); default $"+envDestinations)
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	_ = c.MarkFlagFilename("destinations", "json")
	c.RunE = func(c *cobra.Command, args []string) error {
		var cfg *destinations.Config
		if file, from := destinationsFile(destinationsFlag); file != "" {
			loaded, err := loadDestinations(file, from)
			if err != nil {
				return cli.UsageError("%w", err)
			}
			cfg = &loaded
		} else if len(args) == 0 {
			fmt.Fprintf(c.ErrOrStderr(), "only destinations with a gate are listed; for every configured one: "+
				"--destinations FILE, or export %s=FILE (the workers' destinations file)\n", envDestinations)
		}
		retention, err := ledgerRetention(0)
		if err != nil {
			return err
		}
		ctx := c.Context()
		tc, opts, err := dial(ctx, cli.StderrLogger())
		if err != nil {
			return err
		}
		defer tc.Close()
		desk, err := starter.NewWithOptions(tc, opts).Desk(ctx, cfg, args...)
		if err != nil {
			return err
		}
		if asJSON {
			return cli.PrintJSON(c.OutOrStdout(), desk)
		}
		if err := printDesk(c.OutOrStdout(), c.ErrOrStderr(), desk); err != nil {
			return err
		}
		var kept time.Duration
		namespace := cmp.Or(opts.Namespace, client.DefaultNamespace)
		if ns, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace}); err == nil {
			kept = ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration()
		}
		fmt.Fprintf(c.OutOrStdout(), "\nHorizon: %s\n", worker.Horizon(ledgerURL("") != "", retention, kept))
		if cfg != nil {
			if names := cfg.Unproven(); len(names) > 0 {
				fmt.Fprintf(c.OutOrStdout(), "Unproven reviews (no reviewer keys: any typed name decides): %s\n", strings.Join(names, ", "))
			}
		}
		return nil
	}
	return c
}

// deskWidth is the terminal width the table fits: the why of each
// destination is cut to what the other columns leave of it, but never
// below deskMinWhy, however long the names.
const (
	deskWidth  = 120
	deskMinWhy = 20
	// deskSince leaves the year to --json, for the why's room.
	deskSince = "01-02 15:04"
)

// printDesk prints destinations' statuses as a table, and on stderr how to
// move on from a gate stopped while it held its destination.
func printDesk(stdout, stderr io.Writer, desk []gateclient.Status) error {
	header := []string{"DESTINATION", "DEDUP", "STATE", "SINCE", "BREAKER", "PARKED", "HELD", "RETRYING"}
	rows := [][]string{header}
	whys := []string{"WHY"}
	for _, g := range desk {
		dedup := "-"
		switch {
		case g.Configured != nil && !*g.Configured:
			dedup = "not configured"
		case g.Dedup != "":
			dedup = string(g.Dedup)
		}
		state := g.State
		if g.Stopped != "" && g.State != gate.Closed {
			state += " (gate " + g.Stopped + ")"
		}
		since := "-"
		if !g.Since.IsZero() {
			since = g.Since.Local().Format(deskSince)
		}
		breaker := g.Breaker.State
		if n := g.Breaker.Failures; n > 0 {
			// Consecutive failures, of those that open it.
			breaker += " " + strconv.Itoa(n)
			if g.Breaker.Config != nil {
				breaker += "/" + strconv.Itoa(g.Breaker.Config.Failures)
			}
		}
		why := "-"
		if n := len(g.Transitions); n > 0 {
			t := g.Transitions[n-1]
			// One line however the reason was typed.
			why = strings.Join(strings.Fields(text.Printable(t.Why)), " ") + " (" + text.Printable(t.By) + ")"
		}
		// A gate's name and its transitions' words are whoever wrote them:
		// no terminal escape reaches the operator's screen.
		rows = append(rows, []string{text.Printable(g.Name), dedup, state, since, breaker,
			strconv.FormatInt(g.Parked, 10), strconv.FormatInt(g.Held, 10), strconv.FormatInt(g.Retrying, 10)})
		whys = append(whys, why)
	}
	const pad = 2
	used := 0
	for col := range header {
		w := 0
		for _, r := range rows {
			w = max(w, utf8.RuneCountInString(r[col]))
		}
		used += w + pad
	}
	room := max(deskWidth-used, deskMinWhy)
	tw := tabwriter.NewWriter(stdout, 0, 4, pad, ' ', 0)
	for i, r := range rows {
		why := whys[i]
		if utf8.RuneCountInString(why) > room {
			// Excerpt cuts bytes, and adds one rune.
			why = text.Excerpt(why, room-1)
		}
		fmt.Fprintf(tw, "%s\t%s\n", strings.Join(r, "\t"), why)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range desk {
		if g.Stopped != "" && g.State != gate.Closed {
			// Nothing runs to lift it: the operator decides.
			fmt.Fprintf(stderr, "%s: its gate was %s while %s; it holds until: %s\n", g.Name, g.Stopped, g.State, gate.StoppedHow(g.Name))
		}
	}
	return nil
}

// parseUntil reads an RFC 3339 time, or a duration from now.
func parseUntil(s string, now time.Time) (time.Time, error) {
	t, err := timeOrDuration(s, now, 1)
	switch {
	case errors.Is(err, errNotPositive):
		return time.Time{}, fmt.Errorf("%q is not in the future", s)
	case err != nil:
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-12-01T14:00:00Z) nor a duration (2h)", s)
	}
	return t, nil
}

var errNotPositive = errors.New("the duration is not positive")

// timeOrDuration reads an RFC 3339 time, or a positive duration d meaning
// now + sign×d (sign -1: that long ago).
func timeOrDuration(s string, now time.Time, sign time.Duration) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, errNotPositive
		}
		return now.Add(sign * d), nil
	}
	return time.Parse(time.RFC3339, s)
}
