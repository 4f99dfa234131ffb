package starter

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
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
	matches []BulkMatch
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
		read[i].Summary, read[i].Parked = Summary(st.Operation), st.Review.Requested
		read[i].Evidence = st.Review.Evidence
	}
	if f.byStatus() {
		all = slices.DeleteFunc(all, func(m BulkMatch) bool {
			st, ok := statuses[m.Key]
			return !ok || (f.Tenant != "" && st.Operation.Tenant != f.Tenant) ||
				(!f.ParkedBefore.IsZero() && !st.Review.Requested.Before(f.ParkedBefore))
		})
	}
	p.matches, p.Matched, p.Keys = all, len(all), keysOf(all)
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

// BulkDecision is one decision for every delivery of a preview.
type BulkDecision struct {
	Decision string `json:"decision"`
	Reviewer string `json:"reviewer"`
	Note     string `json:"note"`
	// ResourceIDs, by key, are required with decision delivered: each
	// delivery's effect has an id of its own. Only those keys are decided.
	ResourceIDs map[string]string `json:"-"`
	// RPS paces the decisions, per second; 0 is DefaultBulkRPS.
	RPS float64 `json:"rps"`
}

// DefaultBulkRPS paces a bulk review: each decision may send a retry to the
// destination, which may just be recovering.
const DefaultBulkRPS = 20

// decision is d for one delivery of job.
func (d BulkDecision) decision(job, key string) workflows.ReviewDecision {
	return workflows.ReviewDecision{Decision: d.Decision, Reviewer: d.Reviewer, Note: d.Note,
		ResourceID: d.ResourceIDs[key], BatchJob: job}
}

// BulkReport is what a bulk review did, counted from each delivery's own
// review records.
type BulkReport struct {
	JobID    string `json:"job_id"`
	Decision string `json:"decision"`
	Reviewer string `json:"reviewer"`
	Note     string `json:"note"`
	// Via is how the decisions went: "batch signal" (one Temporal batch job
	// signalling review), or "updates" (delivered: one validated update per
	// delivery, each with its resource id).
	Via string `json:"via"`
	// Query is the batch job's visibility query; empty when it named the
	// executions (a filter checked against statuses).
	Query   string `json:"query,omitempty"`
	Matched int    `json:"matched"`
	// Sent and Failed are the job's own counts (or the updates'); a
	// delivery that finished in between counts as failed. More sent than
	// matched: deliveries parked after the preview matched the job's query
	// too (their records are not read here).
	Sent   int `json:"sent"`
	Failed int `json:"failed"`
	// RequestedRPS is the pace asked for; SentPerSecond the pace the job
	// kept, from its start to its close (Temporal 1.29 paces batch jobs by
	// its worker.batcherRPS setting alone, 50 a second by default).
	RequestedRPS  float64 `json:"requested_rps"`
	SentPerSecond float64 `json:"sent_per_second"`
	// Seconds from the start of the job to the last status read.
	Seconds float64 `json:"seconds"`
	BulkCount
}

// BulkCount is how the deliveries took one batch job's decision.
type BulkCount struct {
	// Accepted deliveries acted on the decision; Ignored ones recorded it
	// and did nothing, for the reason in IgnoredDeliveries.
	Accepted int `json:"accepted"`
	Ignored  int `json:"ignored"`
	// Repeats of the decision that arrived again at a delivery that had
	// accepted it: counted once, not acted on.
	Repeats int `json:"repeats"`
	// Unaccounted deliveries hold no record of the job: the decision did
	// not reach them (see Failed), or they finished and could not be read.
	Unaccounted       int           `json:"unaccounted"`
	IgnoredDeliveries []BulkIgnored `json:"ignored_deliveries,omitempty"`
	UnaccountedKeys   []string      `json:"unaccounted_keys,omitempty"`
}

// BulkIgnored is a delivery that ignored the decision, and why.
type BulkIgnored struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// ReviewBulk sends d to every delivery of p (from PreviewBulk) and reports
// how each took it.
// Retry and abandon go as ONE Temporal batch job signalling review (the
// preview's query, or its executions when the filter read statuses),
// paced at d.RPS; delivered goes as one validated update per delivery
// named in d.ResourceIDs. Every decision carries the job's id, so each
// delivery's review record names the job, and a delivery that receives
// the job's decision twice acts on it once. Errors before anything is
// sent: *InvalidRequestError.
func (s *Client) ReviewBulk(ctx context.Context, p BulkPreview, d BulkDecision) (BulkReport, error) {
	job := "courier-review-" + uuid.NewString()
	if d.RPS == 0 {
		d.RPS = DefaultBulkRPS
	}
	rep := BulkReport{JobID: job, Decision: d.Decision, Reviewer: d.Reviewer, Note: d.Note,
		Matched: p.Matched, RequestedRPS: d.RPS}
	if err := s.checkBulk(p, d, job); err != nil {
		return rep, err
	}
	if p.Matched == 0 {
		return rep, nil
	}
	started := time.Now()
	keys := p.Keys
	var refused map[string]string
	if d.Decision == workflows.DecisionDelivered {
		rep.Via = "updates"
		keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { _, ok := d.ResourceIDs[k]; return !ok })
		rep.Matched = len(keys)
		refused = s.updateEach(ctx, keys, d, job)
		rep.Sent, rep.Failed = len(keys)-len(refused), len(refused)
		rep.SentPerSecond = float64(rep.Sent) / time.Since(started).Seconds()
	} else {
		rep.Via = "batch signal"
		if !p.Filter.byStatus() {
			rep.Query = p.Query
		}
		resp, err := s.batchSignal(ctx, p, d, job)
		rep.Sent, rep.Failed = int(resp.GetCompleteOperationCount()), int(resp.GetFailureOperationCount())
		if took := resp.GetCloseTime().AsTime().Sub(resp.GetStartTime().AsTime()); took > 0 {
			rep.SentPerSecond = float64(rep.Sent) / took.Seconds()
		}
		if err != nil {
			return rep, err
		}
	}
	count, err := s.CountBatchJob(ctx, job, keys)
	// A refused update leaves no record in the delivery: its answer says why.
	count.UnaccountedKeys = slices.DeleteFunc(count.UnaccountedKeys, func(k string) bool {
		reason, ok := refused[k]
		if ok {
			count.Ignored, count.Unaccounted = count.Ignored+1, count.Unaccounted-1
			count.IgnoredDeliveries = append(count.IgnoredDeliveries, BulkIgnored{Key: k, Reason: reason})
		}
		return ok
	})
	slices.SortFunc(count.IgnoredDeliveries, func(a, b BulkIgnored) int { return strings.Compare(a.Key, b.Key) })
	rep.BulkCount = count
	rep.Seconds = time.Since(started).Seconds()
	return rep, err
}

// checkBulk refuses a bulk decision that cannot be sent as it is.
func (s *Client) checkBulk(p BulkPreview, d BulkDecision, job string) error {
	one := d.decision(job, "")
	if d.Decision == workflows.DecisionDelivered {
		if len(d.ResourceIDs) == 0 {
			return &InvalidRequestError{errors.New("decision delivered in bulk needs the resource id of each delivery's effect " +
				"(a batch signal carries one payload for all): give them by key")}
		}
		one.ResourceID = "checked-per-key"
	} else if len(d.ResourceIDs) > 0 {
		return &InvalidRequestError{fmt.Errorf("resource ids go with decision delivered only, not %s", d.Decision)}
	}
	if err := one.Validate(); err != nil {
		return &InvalidRequestError{err}
	}
	if d.RPS < 0 {
		return &InvalidRequestError{errors.New("rps: must be positive")}
	}
	if p.Matched > MaxBulk {
		return &InvalidRequestError{fmt.Errorf("%d deliveries match; one bulk review decides at most %d: narrow the filter (e.g. --parked-before, --operation)", p.Matched, MaxBulk)}
	}
	matched := map[string]bool{}
	for _, k := range p.Keys {
		matched[k] = true
	}
	for k, id := range d.ResourceIDs {
		if !matched[k] {
			return &InvalidRequestError{fmt.Errorf("delivery %s is not among the %d the filter matched", k, p.Matched)}
		}
		if err := checkResourceID(id); err != nil {
			return &InvalidRequestError{fmt.Errorf("delivery %s: %w", k, err)}
		}
	}
	return nil
}

// concurrentWait is how long a bulk review waits for another batch job of
// the namespace to finish: the server counts running jobs in its
// visibility store, which lags a job's end by a moment.
const concurrentWait = 10 * time.Second

// batchSignal starts the batch job signalling d and waits for it to end.
func (s *Client) batchSignal(ctx context.Context, p BulkPreview, d BulkDecision, job string) (*workflowservice.DescribeBatchOperationResponse, error) {
	input, err := s.dc.ToPayloads(d.decision(job, ""))
	if err != nil {
		return nil, fmt.Errorf("encode the decision: %w", err)
	}
	req := visibility.SignalJob{
		Namespace: s.namespace, JobID: job,
		Reason:    fmt.Sprintf("courier review: %s by %s: %s", d.Decision, d.Reviewer, d.Note),
		PerSecond: d.RPS,
		Signal:    workflows.SignalReview, Input: input, Identity: "courier review --all, reviewer " + d.Reviewer,
	}.Request()
	if p.Filter.byStatus() {
		// The query cannot say it: name the deliveries the statuses chose,
		// in the runs that were listed.
		runs := map[string]string{}
		for _, m := range p.matches {
			runs[m.Key] = m.RunID
		}
		for _, k := range p.Keys {
			//lint:ignore SA1019 Temporal 1.29 reads executions, not target_executions
			req.Executions = append(req.Executions, &commonpb.WorkflowExecution{WorkflowId: workflows.WorkflowID(k), RunId: runs[k]})
		}
	} else {
		req.VisibilityQuery = p.Query
	}
	svc := s.c.WorkflowService()
	for deadline := time.Now().Add(concurrentWait); ; {
		_, err := svc.StartBatchOperation(ctx, req)
		var busy *serviceerror.ResourceExhausted
		switch {
		case err == nil:
		case errors.As(err, &busy) && busy.Cause == enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT && time.Now().Before(deadline):
			if err := sleep(ctx, time.Second); err != nil {
				return nil, err
			}
			continue
		case errors.As(err, &busy) && busy.Cause == enumspb.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT:
			return nil, fmt.Errorf("another batch job is running in namespace %s, and Temporal runs a limited number at a time "+
				"(frontend.MaxConcurrentBatchOperationPerNamespace): see `temporal batch list`, and run again once it is done: %w", s.namespace, err)
		default:
			return nil, fmt.Errorf("start batch job %s: %w", job, err)
		}
		break
	}
	for {
		resp, err := svc.DescribeBatchOperation(ctx, &workflowservice.DescribeBatchOperationRequest{Namespace: s.namespace, JobId: job})
		if err != nil {
			return nil, fmt.Errorf("batch job %s (it goes on; follow it with `temporal batch describe --job-id %s`): %w", job, job, err)
		}
		switch resp.GetState() {
		case enumspb.BATCH_OPERATION_STATE_RUNNING, enumspb.BATCH_OPERATION_STATE_UNSPECIFIED:
		case enumspb.BATCH_OPERATION_STATE_COMPLETED:
			return resp, nil
		default:
			return resp, fmt.Errorf("batch job %s ended %s: see `temporal batch describe --job-id %s`", job, resp.GetState(), job)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return nil, fmt.Errorf("stopped waiting for batch job %s; it goes on in Temporal: `temporal batch describe --job-id %s`: %w", job, job, err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// updateConcurrency bounds the delivered updates in flight.
const updateConcurrency = 8

// updateEach sends d to each delivery by the validated update, paced at
// d.RPS, and returns why each refused one was refused, by key.
func (s *Client) updateEach(ctx context.Context, keys []string, d BulkDecision, job string) map[string]string {
	refused := map[string]string{}
	tick := time.NewTicker(max(time.Duration(float64(time.Second)/d.RPS), time.Microsecond))
	defer tick.Stop()
	var mu sync.Mutex
	each(len(keys), updateConcurrency, func(i int) {
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		_, err := s.Review(ctx, keys[i], d.decision(job, keys[i]))
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			refused[keys[i]] = err.Error()
		}
	})
	return refused
}

// CountBatchJob reads each delivery's status and counts how it took the
// decision of batch job job: accepted, ignored (and why), repeated, or no
// record of it at all.
func (s *Client) CountBatchJob(ctx context.Context, job string, keys []string) (BulkCount, error) {
	c := BulkCount{IgnoredDeliveries: []BulkIgnored{}}
	var firstErr error
	s.eachStatus(ctx, keys, func(key string, st workflows.DeliveryStatus, err error) {
		if err != nil {
			if firstErr == nil && !errors.Is(err, ErrUnknownKey) {
				firstErr = err
			}
			c.Unaccounted++
			c.UnaccountedKeys = append(c.UnaccountedKeys, key)
			return
		}
		var accepted, ignored *workflows.ReviewRecord
		if st.Review != nil {
			for j, rec := range st.Review.Decisions {
				switch {
				case rec.BatchJob != job:
				case rec.Accepted:
					accepted = &st.Review.Decisions[j]
				case ignored == nil:
					ignored = &st.Review.Decisions[j]
				}
			}
		}
		switch {
		case accepted != nil:
			c.Accepted++
			c.Repeats += accepted.Repeats
		case ignored != nil:
			c.Ignored++
			c.IgnoredDeliveries = append(c.IgnoredDeliveries, BulkIgnored{Key: key, Reason: ignored.Reason})
		default:
			c.Unaccounted++
			c.UnaccountedKeys = append(c.UnaccountedKeys, key)
		}
	})
	slices.SortFunc(c.IgnoredDeliveries, func(a, b BulkIgnored) int { return strings.Compare(a.Key, b.Key) })
	slices.Sort(c.UnaccountedKeys)
	if firstErr != nil {
		return c, fmt.Errorf("read the deliveries' statuses: %w", firstErr)
	}
	return c, nil
}

// ResourceID is one line of a resource ids file: a delivery's key and the
// id of the effect the reviewer found for it.
type ResourceID struct {
	Line       int
	Key        string
	ResourceID string
}

// ReadResourceIDs reads "key,resource-id" lines (blank lines and lines
// starting with # are skipped). A malformed key, a key given twice or a bad
// resource id is refused with its line number.
func ReadResourceIDs(r io.Reader) ([]ResourceID, error) {
	var out []ResourceID
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, id, ok := strings.Cut(line, ",")
		if !ok {
			return nil, fmt.Errorf("line %d: %q is not key,resource-id", n, line)
		}
		key, err := ParseKey(k)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("line %d: key %s is on line %d already; give each delivery one resource id", n, key, first)
		}
		id = strings.TrimSpace(id)
		if err := checkResourceID(id); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		seen[key] = n
		out = append(out, ResourceID{Line: n, Key: key, ResourceID: id})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no key,resource-id lines")
	}
	return out, nil
}

func checkResourceID(id string) error {
	switch {
	case id == "":
		return errors.New("resource id: empty; give the id of the effect you found")
	case len(id) > workflows.MaxResourceIDLen:
		return fmt.Errorf("resource id: %d bytes is over the limit of %d", len(id), workflows.MaxResourceIDLen)
	case !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl):
		return fmt.Errorf("resource id %q: holds control characters or invalid UTF-8", id)
	}
	return nil
}

// CheckResourceIDs checks every line names a delivery p matched; a key
// that did not match says why (no such delivery, or in what state it is).
func (s *Client) CheckResourceIDs(ctx context.Context, p BulkPreview, lines []ResourceID) (map[string]string, error) {
	matched := map[string]bool{}
	for _, k := range p.Keys {
		matched[k] = true
	}
	ids := map[string]string{}
	for _, l := range lines {
		if matched[l.Key] {
			ids[l.Key] = l.ResourceID
			continue
		}
		st, err := s.Status(ctx, l.Key)
		switch {
		case errors.Is(err, ErrUnknownKey):
			return nil, fmt.Errorf("line %d: no delivery has key %s", l.Line, l.Key)
		case err != nil:
			return nil, fmt.Errorf("line %d: %w", l.Line, err)
		}
		return nil, fmt.Errorf("line %d: delivery %s (%s, state %s) is not among the %d deliveries the filter matched",
			l.Line, l.Key, Summary(st.Operation), st.State, p.Matched)
	}
	return ids, nil
}
