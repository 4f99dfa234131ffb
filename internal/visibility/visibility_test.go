package visibility

import (
	"context"
	"errors"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
)

// pages answers each listing with the page its token names.
type pages struct {
	ids  [][]string
	fail error
	reqs []*workflowservice.ListWorkflowExecutionsRequest
}

func (p *pages) ListWorkflow(_ context.Context, r *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	p.reqs = append(p.reqs, copyOf(r))
	i := len(r.NextPageToken)
	if i == len(p.ids) {
		return nil, p.fail
	}
	resp := &workflowservice.ListWorkflowExecutionsResponse{}
	for _, id := range p.ids[i] {
		resp.Executions = append(resp.Executions, &workflowpb.WorkflowExecutionInfo{Execution: &commonpb.WorkflowExecution{WorkflowId: id}})
	}
	if i+1 < len(p.ids) || p.fail != nil {
		resp.NextPageToken = make([]byte, i+1)
	}
	return resp, nil
}

func copyOf(r *workflowservice.ListWorkflowExecutionsRequest) *workflowservice.ListWorkflowExecutionsRequest {
	return &workflowservice.ListWorkflowExecutionsRequest{Query: r.Query, PageSize: r.PageSize, NextPageToken: r.NextPageToken}
}

func TestExecutionsPages(t *testing.T) {
	p := &pages{ids: [][]string{{"a", "b"}, {"c"}}}
	req := &workflowservice.ListWorkflowExecutionsRequest{Query: "q", PageSize: 2}
	var got []string
	for e, err := range Executions(context.Background(), p, req) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.GetExecution().GetWorkflowId())
	}
	if len(got) != 3 || got[2] != "c" || len(p.reqs) != 2 || p.reqs[1].Query != "q" || p.reqs[1].PageSize != 2 {
		t.Fatalf("got %v after %d requests", got, len(p.reqs))
	}
	if req.NextPageToken != nil {
		t.Fatal("the caller's request was changed")
	}
}

func TestExecutionsStopsAndFails(t *testing.T) {
	p := &pages{ids: [][]string{{"a", "b"}, {"c"}}}
	for range Executions(context.Background(), p, &workflowservice.ListWorkflowExecutionsRequest{}) {
		break
	}
	if len(p.reqs) != 1 {
		t.Fatalf("a loop that stopped read %d pages", len(p.reqs))
	}
	boom := errors.New("boom")
	p = &pages{ids: [][]string{{"a"}}, fail: boom}
	var n int
	var last error
	for _, err := range Executions(context.Background(), p, &workflowservice.ListWorkflowExecutionsRequest{}) {
		n++
		last = err
	}
	if n != 2 || !errors.Is(last, boom) {
		t.Fatalf("%d yields, last error %v", n, last)
	}
}
