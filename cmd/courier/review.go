package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/abde64c9/courier/internal/cli"
	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// bulkFlags are review's flags for --all.
type bulkFlags struct {
	all, yes, dryRun bool
	filter           starter.BulkFilter
	parkedBefore     string
	resourceIDs      string
	rps              float64
	sample           int
}

func reviewCommand() *cobra.Command {
	var d workflows.ReviewDecision
	var wait, print bool
	var keyFile string
	var ttl time.Duration
	var b bulkFlags
	c := &cobra.Command{
		Use:   "review KEY|--all [filters] --decision retry|delivered|abandon --reviewer NAME --note TEXT [--resource-id ID]",
		Short: "decide a delivery awaiting review, or many at once: retry, delivered or abandon",
		Long: `Decides a delivery awaiting review, through the workflow's validated update: a decision
the workflow cannot act on (malformed, not an allowed reviewer, a delivery not awaiting
review) is refused with the reason and changes nothing.

  delivered  you found the effect at the destination: give its --resource-id
  retry      you checked it is not there: Courier sends again, with a fresh retry budget
  abandon    give up: the delivery ends as abandoned

Prints the recorded decision as JSON (with --wait, the delivery's status once it moves on).

Where the destination's reviewers have keys, a decision carries a proof signed with your
key: --key FILE (default $COURIER_REVIEWER_KEY), a file courier review keygen wrote. The
command reads the delivery's status (its key, destination and the time it parked) and
signs the decision for that park alone, good for --ttl. With --print it prints the
decision as JSON instead of sending it: paste it into the web UI's Send an Update (name
review), or give it to temporal workflow update execute --name review --input.

With --all instead of KEY, decides every delivery awaiting review that the filters select
(--destination, --tenant, --operation, --parked-before, --query; running deliveries in
state awaiting_review only). It prints how many match and a sample, and sends nothing
without --yes (--dry-run only lists them). Retry and abandon go as one Temporal batch job
signalling review, paced by --rps; delivered needs each delivery's resource id, from
--resource-ids FILE (key,resource-id lines), and goes as one validated update each.
Every decision names the job in the delivery's review record, and a delivery takes one
job's decision once. It waits for the job, then reads each delivery's status and prints
how many accepted the decision, ignored it (and why) or received it again, as JSON.

With --all and --key FILE (default $COURIER_REVIEWER_KEY) you sign ONE proof for the job:
the decision, the note, the job's id and the filter (--destination, required; --tenant;
--operation; --parked-before, default now), good for --ttl. Each delivery checks the proof
itself against its reviewers' keys, and ignores it with the reason when it lies outside
the filter, or the proof expired or is not yours to give. A signed job takes no --query and
no delivered (sign each delivery's instead). Where reviewers have keys, an unsigned --all
is refused before any job starts.`,
		Example: `  courier review KEY --decision delivered --resource-id ticket-1 --reviewer alice --note "found it in the helpdesk"
  courier review KEY --decision retry --reviewer alice --note "not in the helpdesk" --wait
  courier review KEY --decision retry --reviewer alice --note "not in the helpdesk" --key alice.key --print
  courier review keygen --name alice --out alice.key
  courier review --all --destination legacy --decision retry --reviewer ops --note "outage over" --dry-run
  courier review --all --destination legacy --parked-before 2h --decision retry --reviewer ops --note "outage over" --yes
  courier review --all --destination legacy --decision retry --reviewer alice --note "outage over" --key alice.key --yes
  courier review --all --destination legacy --decision delivered --resource-ids found.csv --reviewer ops --note "found them" --yes`,
		Args: func(c *cobra.Command, args []string) error {
			if b.all {
				if len(args) > 0 {
					return cli.UsageError("--all decides the deliveries the filters select: give no KEY (got %q)", args[0])
				}
				return nil
			}
			return keyArg(c, args)
		},
		Annotations: cli.Exits(cli.CodeOK, cli.CodeError, cli.CodeUsage, cli.CodeRejected, cli.CodeAwaiting, cli.CodeNotDelivered,
			cli.CodeUnknownKey, cli.CodeRefused, cli.CodeStopped),
	}
	f := c.Flags()
	f.StringVar(&d.Decision, "decision", "", "retry, delivered or abandon")
	f.StringVar(&d.Reviewer, "reviewer", "", "who is deciding, `name` (checked against the workers' reviewers list)")
	f.StringVar(&d.Note, "note", "", "why: what you checked, for the audit trail")
	cli.Required(c, "decision", "reviewer", "note")
	cli.Choices(c, "decision", workflows.DecisionRetry, workflows.DecisionDelivered, workflows.DecisionAbandon)
	f.StringVar(&d.ResourceID, "resource-id", "", "the `id` of the effect you found (required with --decision delivered)")
	f.StringVar(&keyFile, "key", "", "your reviewer key `file` (courier review keygen), to sign the decision; default $"+envReviewerKey)
	f.BoolVar(&print, "print", false, "print the (signed) decision as JSON instead of sending it, for the web UI's Send an Update")
	f.DurationVar(&ttl, "ttl", starter.DefaultProofTTL, "how long the signed decision (or --all job) stays good, at most 24h")
	_ = c.MarkFlagFilename("key")
	f.BoolVar(&wait, "wait", false, "wait for the delivery to finish or stop again, print its status, exit as deliver does")
	f.BoolVar(&b.all, "all", false, "decide every delivery awaiting review that the filters below select, instead of KEY")
	f.StringVar(&b.filter.Destination, "destination", "", "with --all: only deliveries to this destination `name`")
	f.StringVar(&b.filter.Tenant, "tenant", "", "with --all: only this tenant's deliveries, `name` (read from each one's status)")
	f.StringVar(&b.filter.Operation, "operation", "", "with --all: only this `operation`, e.g. create-ticket")
	f.StringVar(&b.parkedBefore, "parked-before", "", "with --all: only deliveries that stopped for review before `TIME` (RFC 3339, or a duration ago: 2h)")
	f.StringVar(&b.filter.Query, "query", "", "with --all: a visibility `query` they must match too, e.g. 'CourierBusinessID STARTS_WITH \"inv-\"'")
	f.BoolVar(&b.yes, "yes", false, "with --all: send the decision to every delivery that matches")
	f.BoolVar(&b.dryRun, "dry-run", false, "with --all: list what matches and send nothing")
	f.StringVar(&b.resourceIDs, "resource-ids", "", "with --all --decision delivered: `file` of key,resource-id lines, one per delivery to decide")
	f.Float64Var(&b.rps, "rps", starter.DefaultBulkRPS, "with --all: at most `n` decisions a second (Temporal 1.29 paces a batch job by its worker.batcherRPS alone)")
	f.IntVar(&b.sample, "sample", 5, "with --all: how many matching deliveries to show, `n`")
	_ = c.MarkFlagFilename("resource-ids", "csv", "txt")
	c.RunE = func(c *cobra.Command, args []string) error {
		ctx := c.Context()
		if b.all {
			if print {
				return cli.UsageError("--print prints one delivery's signed decision; with --all, --dry-run shows what the job would sign")
			}
			signer, err := readSigner(keyFile, ttl)
			if err != nil {
				return err
			}
			if err := b.checkSigner(signer, d); err != nil {
				return err
			}
			bd, lines, err := b.check(c, d, wait)
			if err != nil {
				return err
			}
			return withStarter(ctx, func(s *starter.Client) error { return reviewAll(ctx, s, b, bd, lines, signer) })
		}
		if err := b.checkNone(c); err != nil {
			return err
		}
		key, _ := starter.ParseKey(args[0]) // keyArg checked it
		if err := d.Validate(); err != nil {
			return cli.UsageError("invalid decision: %w", err)
		}
		if print && wait {
			return cli.UsageError("--print sends nothing, so there is nothing to --wait for")
		}
		signer, err := readSigner(keyFile, ttl)
		if err != nil {
			return err
		}
		return withStarter(ctx, func(s *starter.Client) error {
			if signer != nil {
				if d, err = s.Sign(ctx, key, d, *signer); err != nil {
					return startError(err)
				}
			}
			if print {
				return cli.PrintJSON(os.Stdout, d)
			}
			return review(ctx, s, key, d, wait)
		})
	}
	c.AddCommand(keygenCommand())
	return c
}

// envReviewerKey names the reviewer key file when --key does not.
const envReviewerKey = "COURIER_REVIEWER_KEY"

// readSigner reads the reviewer key file (--key, else $COURIER_REVIEWER_KEY);
// nil when neither names one: the decision goes unsigned.
func readSigner(path string, ttl time.Duration) (*starter.Signer, error) {
	from := "--key"
	if path == "" {
		path, from = os.Getenv(envReviewerKey), "$"+envReviewerKey
	}
	if path == "" {
		return nil, nil
	}
	if ttl <= 0 || ttl > reviewproof.MaxLifetime {
		return nil, cli.UsageError("--ttl %s: a signed decision stays good for more than nothing and at most %s", ttl, reviewproof.MaxLifetime)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, cli.UsageError("%s: %w (courier review keygen --name NAME --out FILE creates a reviewer key)", from, err)
	}
	name, key, err := reviewproof.ParseKeyFile(b)
	if err != nil {
		return nil, cli.UsageError("%s %s: %w", from, path, err)
	}
	return &starter.Signer{Name: name, Key: key, TTL: ttl}, nil
}

func keygenCommand() *cobra.Command {
	var name, out string
	c := &cobra.Command{
		Use:   "keygen --name NAME --out FILE",
		Short: "create a reviewer's key pair: the private key to a file, the reviewers entry to stdout",
		Long: `Creates an Ed25519 key pair for the reviewer NAME. The private key goes to FILE (mode 0600;
it is never overwritten); keep it where only you can read it, and point --key or
$COURIER_REVIEWER_KEY at it. The entry printed (name, public key, decisions) goes into
the destinations file's reviewers, at the top (every destination) or in a destination;
trim its decisions to what NAME may decide.`,
		Example:     "  courier review keygen --name alice --out ~/.courier/alice.key",
		Args:        cobra.NoArgs,
		Annotations: cli.Exits(cli.CodeOK, cli.CodeError, cli.CodeUsage),
		RunE: func(c *cobra.Command, _ []string) error {
			entry, err := keygen(name, out)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "private key written to %s; add this entry to the destinations file's reviewers:\n", out)
			return cli.PrintJSON(os.Stdout, entry)
		},
	}
	c.Flags().StringVar(&name, "name", "", "the reviewer's `name`: the key id its proofs carry")
	c.Flags().StringVar(&out, "out", "", "the private key `file` to create")
	cli.Required(c, "name", "out")
	return c
}

// keygen writes a new private key for name to out and returns its
// reviewers entry.
func keygen(name, out string) (reviewproof.Reviewer, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return reviewproof.Reviewer{}, err
	}
	entry := reviewproof.Reviewer{Name: name, Key: reviewproof.FormatPublicKey(pub), Decisions: reviewproof.Decisions}
	if err := entry.Check(); err != nil {
		return entry, cli.UsageError("--name: %w", err)
	}
	b, err := json.MarshalIndent(reviewproof.NewKeyFile(name, key), "", "  ")
	if err != nil {
		return entry, err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return entry, cli.UsageError("--out: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return entry, err
	}
	return entry, f.Close()
}

// bulkOnly are the flags that mean something with --all only.
var bulkOnly = []string{"destination", "tenant", "operation", "parked-before", "query", "yes", "dry-run", "resource-ids", "rps", "sample"}

// checkNone refuses --all's flags for one delivery.
func (b *bulkFlags) checkNone(c *cobra.Command) error {
	for _, name := range bulkOnly {
		if c.Flags().Changed(name) {
			return cli.UsageError("--%s selects or paces deliveries for --all; for one delivery give its KEY alone", name)
		}
	}
	return nil
}

// check validates --all's flags before anything is sent, and reads the
// resource ids file.
func (b *bulkFlags) check(c *cobra.Command, d workflows.ReviewDecision, wait bool) (starter.BulkDecision, []starter.ResourceID, error) {
	bd := starter.BulkDecision{Decision: d.Decision, Reviewer: d.Reviewer, Note: d.Note, RPS: b.rps}
	switch {
	case d.ResourceID != "":
		return bd, nil, cli.UsageError("--resource-id is one delivery's; with --all give --resource-ids FILE of key,resource-id lines")
	case wait:
		return bd, nil, cli.UsageError("--wait follows one delivery; --all waits for its batch job and reports each delivery's decision")
	case b.yes && b.dryRun:
		return bd, nil, cli.UsageError("--yes sends and --dry-run does not: give one of them")
	case b.rps <= 0:
		return bd, nil, cli.UsageError("--rps must be positive, e.g. --rps %d", starter.DefaultBulkRPS)
	case b.sample < 0:
		return bd, nil, cli.UsageError("--sample must not be negative")
	case d.Decision == workflows.DecisionDelivered && b.resourceIDs == "":
		return bd, nil, cli.UsageError("--decision delivered with --all needs --resource-ids FILE: one key,resource-id line per delivery " +
			"(each effect has its own id, and a batch signal carries one payload for all)")
	case d.Decision != workflows.DecisionDelivered && b.resourceIDs != "":
		return bd, nil, cli.UsageError("--resource-ids goes with --decision delivered, not %s", d.Decision)
	}
	if b.parkedBefore != "" {
		t, err := parseTimeOrAgo(b.parkedBefore)
		if err != nil {
			return bd, nil, cli.UsageError("--parked-before %q: %w", b.parkedBefore, err)
		}
		b.filter.ParkedBefore = t
	}
	check := workflows.ReviewDecision{Decision: d.Decision, Reviewer: d.Reviewer, Note: d.Note}
	if d.Decision == workflows.DecisionDelivered {
		check.ResourceID = "from --resource-ids"
	}
	if err := check.Validate(); err != nil {
		return bd, nil, cli.UsageError("invalid decision: %w", err)
	}
	if b.resourceIDs == "" {
		return bd, nil, nil
	}
	f, err := os.Open(b.resourceIDs)
	if err != nil {
		return bd, nil, cli.UsageError("--resource-ids: %w", err)
	}
	defer f.Close()
	lines, err := starter.ReadResourceIDs(f)
	if err != nil {
		return bd, nil, cli.UsageError("--resource-ids %s: %w", b.resourceIDs, err)
	}
	return bd, lines, nil
}

// checkSigner refuses what a signed job cannot carry, before anything is
// read, and bounds an unbounded job to what had parked when it is signed.
func (b *bulkFlags) checkSigner(sg *starter.Signer, d workflows.ReviewDecision) error {
	switch {
	case sg == nil:
		return nil
	case d.Decision == workflows.DecisionDelivered:
		return cli.UsageError("a signed --all decides retry or abandon: delivered needs each delivery's own resource id, " +
			"so sign each (courier review KEY --decision delivered --resource-id ID --key FILE)")
	case b.filter.Query != "":
		return cli.UsageError("--query cannot be signed: each delivery checks the signed filter itself " +
			"(--destination, --tenant, --operation, --parked-before) and cannot check a query")
	case b.filter.Destination == "":
		return cli.UsageError("a signed --all (you sign as %s, from --key or $%s) needs --destination: "+
			"reviewers' keys and what they may decide are a destination's", sg.Name, envReviewerKey)
	case b.parkedBefore == "":
		// What the reviewer sees in the preview, and nothing that parks later.
		b.parkedBefore = time.Now().UTC().Format(time.RFC3339Nano)
	}
	return nil
}

// parseTimeOrAgo reads an RFC 3339 time, or a duration meaning that long ago.
func parseTimeOrAgo(s string) (time.Time, error) {
	t, err := timeOrDuration(s, time.Now(), -1)
	if err != nil {
		return time.Time{}, errors.New("give an RFC 3339 time (2026-03-01T09:00:00Z) or a duration ago (90m, 2h)")
	}
	return t, nil
}

// reviewAll previews the deliveries b selects and, with --yes, decides them
// all and reports how each took the decision.
func reviewAll(ctx context.Context, s *starter.Client, b bulkFlags, d starter.BulkDecision, lines []starter.ResourceID, sg *starter.Signer) error {
	p, err := s.PreviewBulk(ctx, b.filter, b.sample)
	if err != nil {
		return startError(err)
	}
	printPreview(p)
	if lines != nil {
		if d.ResourceIDs, err = s.CheckResourceIDs(ctx, p, lines); err != nil {
			return cli.UsageError("--resource-ids %s: %w; nothing was sent", b.resourceIDs, err)
		}
	}
	if p.Matched == 0 {
		fmt.Fprintln(os.Stderr, "nothing to decide")
		return cli.PrintJSON(os.Stdout, p)
	}
	via := "one batch job signalling review"
	if d.Decision == workflows.DecisionDelivered {
		via = fmt.Sprintf("%d validated updates, each with its resource id", len(d.ResourceIDs))
	}
	what := fmt.Sprintf("decision %s by %s (%q) as %s", d.Decision, d.Reviewer, d.Note, via)
	if sg != nil {
		var claims reviewproof.JobClaims
		if d, claims, err = s.SignBulk(p, d, *sg, time.Now()); err != nil {
			return startError(err)
		}
		what += ", signed by " + sg.Name
		signed, err := json.Marshal(claims)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "signed job (each delivery checks it against itself): %s\n", signed)
	}
	if b.dryRun {
		if sg == nil && len(p.KeyedReviewers) > 0 {
			fmt.Fprintf(os.Stderr, "%s sign their decisions: without --key FILE, --yes would be refused\n", strings.Join(p.KeyedReviewers, " and "))
		}
		fmt.Fprintf(os.Stderr, "dry run: nothing was sent; --yes would send %s\n", what)
		return cli.PrintJSON(os.Stdout, p)
	}
	if !b.yes {
		return cli.UsageError("nothing was sent: add --yes to send %s to these %d deliveries (--dry-run lists them and sends nothing)",
			what, p.Matched)
	}
	rep, err := s.ReviewBulk(ctx, p, d)
	if rep.Via != "" {
		fmt.Fprintf(os.Stderr, "batch job %s: %s sent %d (%.0f a second), failed %d\n",
			rep.JobID, rep.Via, rep.Sent, rep.SentPerSecond, rep.Failed)
	}
	if err != nil {
		return startError(err)
	}
	if rep.Sent > rep.Matched {
		fmt.Fprintf(os.Stderr, "%d more deliveries matched the query when the job ran than before; "+
			"their records are not counted here (courier list --state awaiting_review shows what waits)\n", rep.Sent-rep.Matched)
	}
	fmt.Fprintf(os.Stderr, "%d accepted, %d ignored, %d repeats counted once, %d with no record of the job "+
		"(read from each delivery's status, %.1fs after the job started)\n",
		rep.Accepted, rep.Ignored, rep.Repeats, rep.Unaccounted, rep.Seconds)
	for _, ig := range rep.IgnoredDeliveries {
		fmt.Fprintf(os.Stderr, "  ignored by %s: %s\n", ig.Key, ig.Reason)
	}
	if err := cli.PrintJSON(os.Stdout, rep); err != nil {
		return err
	}
	switch {
	case rep.Unaccounted > 0:
		return &cli.ExitError{Code: cli.CodeError, Err: fmt.Errorf("%d deliveries hold no record of batch job %s: it did not reach them "+
			"(decided or finished in between, or failed above); check them with courier status %s",
			rep.Unaccounted, rep.JobID, rep.UnaccountedKeys[0])}
	case rep.Ignored > 0:
		return &cli.ExitError{Code: cli.CodeRefused, Err: fmt.Errorf("%d deliveries ignored the decision (reasons above)", rep.Ignored)}
	}
	return nil
}

// printPreview says on stderr how many deliveries match, and shows a sample.
func printPreview(p starter.BulkPreview) {
	noun := "deliveries"
	if p.Matched == 1 {
		noun = "delivery"
	}
	fmt.Fprintf(os.Stderr, "%d %s awaiting review match %s\n", p.Matched, noun, p.Query)
	if p.Filter.Tenant != "" || !p.Filter.ParkedBefore.IsZero() {
		var by []string
		if p.Filter.Tenant != "" {
			by = append(by, "tenant "+p.Filter.Tenant)
		}
		if !p.Filter.ParkedBefore.IsZero() {
			by = append(by, "parked before "+p.Filter.ParkedBefore.Format(time.RFC3339))
		}
		fmt.Fprintf(os.Stderr, "  and, by their status, %s\n", strings.Join(by, " and "))
	}
	for _, m := range p.Sample {
		fmt.Fprintf(os.Stderr, "  %s  %s", m.Key, m.Summary)
		if !m.Parked.IsZero() {
			fmt.Fprintf(os.Stderr, "  parked %s", m.Parked.Local().Format(time.DateTime))
		}
		fmt.Fprintln(os.Stderr)
		if m.Evidence != "" {
			fmt.Fprintf(os.Stderr, "      %s\n", m.Evidence)
		}
	}
	if more := p.Matched - len(p.Sample); more > 0 && len(p.Sample) > 0 {
		fmt.Fprintf(os.Stderr, "  ... and %d more\n", more)
	}
}

// review records decision d on the delivery key and prints it or, with
// wait, the delivery's status once it moves on.
func review(ctx context.Context, s *starter.Client, key string, d workflows.ReviewDecision, wait bool) error {
	rec, err := s.Review(ctx, key, d)
	if err != nil {
		return startError(err)
	}
	if !wait {
		fmt.Fprintf(os.Stderr, "decision %s accepted; follow the delivery with: courier status %s\n", rec.Decision, key)
		return cli.PrintJSON(os.Stdout, rec)
	}
	st, err := s.Wait(ctx, key)
	if err != nil {
		return startError(err)
	}
	if err := cli.PrintJSON(os.Stdout, st); err != nil {
		return err
	}
	return outcome(st)
}
