package starter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/abde64c9/courier/internal/visibility"
	"github.com/abde64c9/courier/workflows"
)

// BulkFilter selects deliveries awaiting review for one decision. A bulk
// review only ever reaches running deliveries in state awaiting_review,
// whatever the filter says. Destination and Operation are search
// attributes; Tenant and ParkedBefore are not, so each candidate's status
// is read to check them.
type BulkFilter struct {
	Destination string `json:"destination,omitempty"`
	Tenant      string `json:"tenant,omitempty"`
	Operation   string `json:"operation,omitempty"`
	// ParkedBefore keeps deliveries that stopped for review before it.
	ParkedBefore time.Time `json:"parked_before,omitzero"`
	// Query is a visibility query the deliveries must match as well, e.g.
	// CourierBusinessID STARTS_WITH "inv-".
	Query string `json:"query,omitempty"`
}

// VisibilityQuery is the filter as a visibility query, restricted to
// running deliveries awaiting review.
func (f BulkFilter) VisibilityQuery() string {
	q := fmt.Sprintf("WorkflowType = %q AND ExecutionStatus = %q AND %s = %q",
		workflows.WorkflowType, "Running", workflows.SAState.GetName(), workflows.StateAwaitingReview)
	if f.Destination != "" {
		q += fmt.Sprintf(" AND %s = %q", workflows.SADestination.GetName(), f.Destination)
	}
	if f.Operation != "" {
		q += fmt.Sprintf(" AND %s = %q", workflows.SAOperation.GetName(), f.Operation)
	}
	if !f.ParkedBefore.IsZero() {
		// A delivery parks after it starts: this narrows the candidates,
		// their statuses decide.
		q += fmt.Sprintf(" AND StartTime < %q", f.ParkedBefore.UTC().Format(time.RFC3339Nano))
	}
	if f.Query != "" {
		q += " AND (" + f.Query + ")"
	}
	return q
}

// byStatus: some of the filter is checked against each delivery's status.
func (f BulkFilter) byStatus() bool { return f.Tenant != "" || !f.ParkedBefore.IsZero() }

func (f BulkFilter) validate() error {
	if f.Query == "" {
		return nil
	}
	// The query is put in parentheses after the restriction to deliveries
	// awaiting review; one that closed them could lift the restriction.
	depth, quote := 0, rune(0)
	for _, r := range f.Query {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"' || r == '`':
			quote = r
		case r == '(':
			depth++
		case r == ')':
			if depth--; depth < 0 {
				return errors.New("query: a ')' closes more than the query opened; balance its parentheses")
			}
		}
	}
	if quote != 0 || depth != 0 {
		return errors.New("query: unbalanced quotes or parentheses; check the query in the web UI's search box first")
	}
	if strings.Contains(strings.ToUpper(f.Query), "ORDER BY") {
		return errors.New("query: ORDER BY has no meaning for a bulk review; remove it")
	}
	return nil
}

// BulkMatch is one delivery a bulk review would decide.
type BulkMatch struct {
	Key        string `json:"key"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
	// Summary, Evidence and Parked come from the delivery's status: for
	// every match when the filter needs them, else for the sample only.
	Summary  string    `json:"summary,omitempty"`
	Evidence string    `json:"evidence,omitempty"`
	Parked   time.Time `json:"parked,omitzero"`
	// KeyedReviewers, from the status too, says the delivery's reviewers
	// sign their decisions.
	KeyedReviewers string `json:"keyed_reviewers,omitempty"`
}

// BulkPreview is what a bulk review would decide, before anything is sent.
type BulkPreview struct {
	Filter BulkFilter `json:"filter"`
	Query  string     `json:"query"`
	// Matched counts the deliveries; Keys lists them all, Sample a few
	// with their summary and evidence.
	Matched int         `json:"matched"`
	Keys    []string    `json:"keys"`
	Sample  []BulkMatch `json:"sample"`
	// KeyedReviewers are the keyed reviewers of the matches whose status
	// was read: their decisions must be signed.
	KeyedReviewers []string `json:"keyed_reviewers,omitempty"`
	matches        []BulkMatch
}

// MaxBulk bounds the deliveries one bulk review decides, and so the statuses
// it reads back; Temporal documents the same default bound for a batch job
// (frontend.MaxExecutionCountBatchOperationPerNamespace).
const MaxBulk = 1000

// statusConcurrency bounds the status queries in flight.
const statusConcurrency = 8

// PreviewBulk finds the deliveries f selects and reads the status of a
// sample of them (of all of them when f needs their statuses). It sends
// nothing. Visibility lags the deliveries by a moment.
func (s *Client) PreviewBulk(ctx context.Context, f BulkFilter, samples int) (BulkPreview, error) {
	p := BulkPreview{Filter: f, Query: f.VisibilityQuery(), Keys: []string{}, Sample: []BulkMatch{}}
	samples = max(samples, 0)
	if err := f.validate(); err != nil {
		return p, &InvalidRequestError{err}
	}
	var all []BulkMatch
	for e, err := range visibility.Executions(ctx, s.c, &workflowservice.ListWorkflowExecutionsRequest{Query: p.Query}) {
		if err != nil {
			var invalid *serviceerror.InvalidArgument
			if errors.As(err, &invalid) {
				return p, &InvalidRequestError{fmt.Errorf("query: Temporal refused %s: %s", p.Query, invalid.Message)}
			}
			return p, fmt.Errorf("list deliveries awaiting review: %w", err)
		}
		id := e.GetExecution().GetWorkflowId()
		all = append(all, BulkMatch{Key: strings.TrimPrefix(id, workflows.WorkflowIDPrefix), WorkflowID: id, RunID: e.GetExecution().GetRunId()})
	}
	read := all
	if !f.byStatus() {
		read = all[:min(samples, len(all))]
	}
	statuses, err := s.statuses(ctx, keysOf(read))
	if err != nil {
		return p, err
	}
	for i := range read {
		st, ok := statuses[read[i].Key]
		if !ok {
			continue // finished since it was listed
		}
		read[i].Summary, read[i].Parked = workflows.Summary(st.Operation), st.Review.Requested
		read[i].Evidence, read[i].KeyedReviewers = st.Review.Evidence, st.KeyedReviewers
	}
	if f.byStatus() {
		all = slices.DeleteFunc(all, func(m BulkMatch) bool {
			st, ok := statuses[m.Key]
			return !ok || (f.Tenant != "" && st.Operation.Tenant != f.Tenant) ||
				(!f.ParkedBefore.IsZero() && !st.Review.Requested.Before(f.ParkedBefore))
		})
	}
	p.matches, p.Matched, p.Keys = all, len(all), keysOf(all)
	for _, m := range all {
		if m.KeyedReviewers != "" && !slices.Contains(p.KeyedReviewers, m.KeyedReviewers) {
			p.KeyedReviewers = append(p.KeyedReviewers, m.KeyedReviewers)
		}
	}
	p.Sample = slices.Clone(all[:min(samples, len(all))])
	return p, nil
}

func keysOf(ms []BulkMatch) []string {
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	return keys
}

// statuses reads the status of each delivery, a few at a time; one that is
// awaiting review no longer, or gone, is left out.
func (s *Client) statuses(ctx context.Context, keys []string) (map[string]workflows.DeliveryStatus, error) {
	out := make(map[string]workflows.DeliveryStatus, len(keys))
	var firstErr error
	s.eachStatus(ctx, keys, func(key string, st workflows.DeliveryStatus, err error) {
		switch {
		case errors.Is(err, ErrUnknownKey):
		case err != nil:
			if firstErr == nil {
				firstErr = err
			}
		case st.State == workflows.StateAwaitingReview && st.Review != nil:
			out[key] = st
		}
	})
	return out, firstErr
}

// statusRetries bounds how often a status query that failed is asked
// again. Right after a batch job the workers are busy with every delivery's
// decision: a query waits behind them, and may time out or find no poller.
const statusRetries = 6

// patientStatus is Status, asked again after a pause when the query fails
// for any other reason than an unknown key.
func (s *Client) patientStatus(ctx context.Context, key string) (workflows.DeliveryStatus, error) {
	for try := 1; ; try++ {
		st, err := s.Status(ctx, key)
		if err == nil || errors.Is(err, ErrUnknownKey) || try == statusRetries {
			return st, err
		}
		if err := sleep(ctx, time.Duration(try)*time.Second); err != nil {
			return st, err
		}
	}
}

// eachStatus reads each delivery's status, a few at a time, and hands it
// to f, one call at a time.
func (s *Client) eachStatus(ctx context.Context, keys []string, f func(key string, st workflows.DeliveryStatus, err error)) {
	var mu sync.Mutex
	each(len(keys), statusConcurrency, func(i int) {
		st, err := s.patientStatus(ctx, keys[i])
		mu.Lock()
		defer mu.Unlock()
		f(keys[i], st, err)
	})
}

// each runs f(0..n-1), at most limit at a time.
func each(n, limit int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, limit)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			f(i)
		})
	}
	wg.Wait()
}
