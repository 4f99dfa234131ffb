// Package visibility reads and acts on the workflows a visibility query
// selects: the listing every Courier client pages through, and the batch
// job that signals them all at once. It holds no Courier policy; the
// queries, signals and wording are its callers'. Imported by the starter,
// the gates' client and the worker.
package visibility

import (
	"context"
	"iter"

	batchpb "go.temporal.io/api/batch/v1"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/protobuf/proto"
)

// Lister is the part of a Temporal client a listing needs.
type Lister interface {
	ListWorkflow(context.Context, *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
}

// Executions yields the executions req selects, page after page, until the
// pages end or the loop over it stops: a loop that has what it needs reads
// no further page. A failed page is yielded as the error, last. req is not
// changed; the pager sets the page token on its own copy.
func Executions(ctx context.Context, c Lister, req *workflowservice.ListWorkflowExecutionsRequest) iter.Seq2[*workflowpb.WorkflowExecutionInfo, error] {
	return func(yield func(*workflowpb.WorkflowExecutionInfo, error) bool) {
		page := proto.Clone(req).(*workflowservice.ListWorkflowExecutionsRequest)
		for {
			resp, err := c.ListWorkflow(ctx, page)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, e := range resp.GetExecutions() {
				if !yield(e, nil) {
					return
				}
			}
			if page.NextPageToken = resp.GetNextPageToken(); len(page.NextPageToken) == 0 {
				return
			}
		}
	}
}

// SignalJob is a batch job that sends one signal, with one input, to every
// workflow its query selects (or, without a query, to the executions its
// caller names in the request).
type SignalJob struct {
	Namespace, JobID, Reason string
	Query                    string
	// PerSecond paces the signals; Temporal caps it at its
	// worker.batcherRPS setting.
	PerSecond float64
	Signal    string
	Input     *commonpb.Payloads
	Identity  string
}

// Request is the job's StartBatchOperation request.
func (j SignalJob) Request() *workflowservice.StartBatchOperationRequest {
	return &workflowservice.StartBatchOperationRequest{
		Namespace:              j.Namespace,
		JobId:                  j.JobID,
		VisibilityQuery:        j.Query,
		Reason:                 j.Reason,
		MaxOperationsPerSecond: float32(j.PerSecond),
		Operation: &workflowservice.StartBatchOperationRequest_SignalOperation{SignalOperation: &batchpb.BatchOperationSignal{
			Signal: j.Signal, Input: j.Input, Identity: j.Identity,
		}},
	}
}
