package starter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/abde64c9/courier/internal/visibility"
	"github.com/abde64c9/courier/workflows"
)

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
	// JobID and Proof are set by SignBulk: the job's id is signed with it.
	JobID string `json:"job_id,omitempty"`
	Proof string `json:"proof,omitempty"`
}

// DefaultBulkRPS paces a bulk review: each decision may send a retry to the
// destination, which may just be recovering.
const DefaultBulkRPS = 20

// decision is d for one delivery of job.
func (d BulkDecision) decision(job, key string) workflows.ReviewDecision {
	return workflows.ReviewDecision{Decision: d.Decision, Reviewer: d.Reviewer, Note: d.Note,
		ResourceID: d.ResourceIDs[key], BatchJob: job, Proof: d.Proof}
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
	job := d.JobID
	if job == "" {
		job = newJobID()
	}
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
	if err := checkSigned(p, d); err != nil {
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

// batchReason says what a bulk review's job does: the decision, where and
// by whom. Anyone who may describe batch jobs reads it, in clear whatever
// the codec, so the note stays in the signal's input alone (encrypted with
// the codec on).
func batchReason(p BulkPreview, d BulkDecision) string {
	where := "the deliveries the filter matched"
	if p.Filter.Destination != "" {
		where = "deliveries parked at " + p.Filter.Destination
	}
	return fmt.Sprintf("courier review --all: %s %d %s, by %s", d.Decision, p.Matched, where, d.Reviewer)
}

// batchSignal starts the batch job signalling d and waits for it to end.
func (s *Client) batchSignal(ctx context.Context, p BulkPreview, d BulkDecision, job string) (*workflowservice.DescribeBatchOperationResponse, error) {
	input, err := s.dc.ToPayloads(d.decision(job, ""))
	if err != nil {
		return nil, fmt.Errorf("encode the decision: %w", err)
	}
	req := visibility.SignalJob{
		Namespace: s.namespace, JobID: job,
		Reason:    batchReason(p, d),
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
