package bench

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// What a user pays for. Temporal Cloud bills by actions
// (docs.temporal.io/cloud/actions): a workflow start (client, child or
// continue-as-new), an activity started and each retry, a heartbeat that
// reaches the server, local activities once per workflow task that runs
// them, a side effect, a timer, a signal, a query, an accepted or rejected
// update, a search-attribute upsert (those set at start, and the version
// marker's TemporalChangeVersion, are free), a Nexus operation scheduled.
// Deduplicated starts and updates are free.
//
// The server counts them itself in its `action` metric, which the bench
// reads around each batch where the server's metrics are at hand (heartbeats,
// queries and rejected updates leave no event, so only the server sees
// them). historyActions derives the same from a history's event types, for
// a server whose metrics are not, and to show where each action goes.

// Action kinds, as the report names them.
const (
	actionStart    = "workflow started"
	actionActivity = "activity"
	actionLocal    = "local activities"
	actionSide     = "side effect"
	actionTimer    = "timer"
	actionSignal   = "signal"
	actionUpdate   = "update"
	actionUpsert   = "search attribute upsert"
	actionNexus    = "nexus operation"
	// actionChild is a child's start as its parent asks for it: the server
	// counts a child twice, this and the child's own start.
	actionChild = "child start"
)

// Marker names the Go SDK records (internal to the SDK; stable on the wire).
const (
	markerLocalActivity = "LocalActivity"
	markerSideEffect    = "SideEffect"
	markerMutable       = "MutableSideEffect"
	// changeVersionAttribute is the search attribute GetVersion upserts.
	changeVersionAttribute = "TemporalChangeVersion"
)

// historyActions counts the billable actions in one run's events, by kind.
// A workflow's own start counts here: a deduplicated start records no run.
func historyActions(events []*historypb.HistoryEvent) map[string]int {
	out := map[string]int{}
	localTask := int64(-1) // the workflow task whose local activities were counted
	lastTask := int64(0)
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			out[actionStart]++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			lastTask = ev.GetEventId()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			out[actionActivity]++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			// History keeps the last attempt's start only: each earlier
			// attempt was a retry, billed as one.
			out[actionActivity] += max(int(ev.GetActivityTaskStartedEventAttributes().GetAttempt())-1, 0)
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			switch ev.GetMarkerRecordedEventAttributes().GetMarkerName() {
			case markerLocalActivity:
				if localTask != lastTask {
					out[actionLocal]++
					localTask = lastTask
				}
			case markerSideEffect, markerMutable:
				out[actionSide]++
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			out[actionTimer]++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			out[actionSignal]++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			out[actionUpdate]++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			fields := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
			if _, versionOnly := fields[changeVersionAttribute]; !(versionOnly && len(fields) == 1) {
				out[actionUpsert]++
			}
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			out[actionChild]++
		case enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED:
			out[actionNexus]++
		}
	}
	return out
}

// sumActions is the total of a count by kind.
func sumActions(by map[string]int) int {
	n := 0
	for _, v := range by {
		n += v
	}
	return n
}

// actions is the billable count as the report prints it: a derived one
// marked.
func (h HistoryCount) actions() string {
	if h.ActionsSource == "server" {
		return strconv.FormatFloat(h.Actions, 'f', -1, 64)
	}
	return fmt.Sprintf("%d*", h.HistoryActions)
}

// kinds prints a count by kind, largest first.
func kinds(by map[string]int) string {
	names := slices.Collect(maps.Keys(by))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(by[b]-by[a], strings.Compare(a, b)) })
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%d %s", by[n], n)
	}
	return strings.Join(parts, ", ")
}

// What a delivery may cost beyond what it is measured against: the happy
// path's history and bill close to the bare workflow's, and a call from
// workflow code close to the same call made to a bare workflow.
const (
	maxBytesVsBare     = 1.25
	maxActionsOverBare = 1
	maxEventsOverBare  = 2
)

// costTargets holds each side to the ceiling it is measured against.
func costTargets(hs []HistoryCount) []Target {
	by := map[string]HistoryCount{}
	for _, h := range hs {
		by[h.Side] = h
	}
	var ts []Target
	for side, ceiling := range map[string]string{SideKey: SideBare, SideNexus: SideBareNexus, SideChild: SideBareChild} {
		h, okh := by[side]
		c, okc := by[ceiling]
		if !okh || !okc {
			continue
		}
		ts = append(ts, Target{
			Name:   fmt.Sprintf("billable actions per happy-path delivery, %s over %s", side, ceiling),
			Target: fmt.Sprintf("<= %d", maxActionsOverBare), Measured: h.Actions - c.Actions,
			Pass: h.Actions > 0 && h.Actions-c.Actions <= maxActionsOverBare,
		})
		if side != SideKey {
			continue
		}
		ratio := div(float64(h.Bytes), float64(c.Bytes))
		ts = append(ts, Target{
			Name:   fmt.Sprintf("history bytes per happy-path delivery, %s / %s", side, ceiling),
			Target: fmt.Sprintf("<= %.2f", maxBytesVsBare), Measured: ratio, Pass: ratio > 0 && ratio <= maxBytesVsBare,
		}, Target{
			Name:   fmt.Sprintf("history events per happy-path delivery, %s over %s", side, ceiling),
			Target: fmt.Sprintf("<= %d", maxEventsOverBare), Measured: float64(h.Events - c.Events),
			Pass: h.Events > 0 && h.Events-c.Events <= maxEventsOverBare,
		})
	}
	slices.SortFunc(ts, func(a, b Target) int { return strings.Compare(a.Name, b.Name) })
	return ts
}

// eventSizes lists the events with their sizes: where the bytes go.
func (h HistoryCount) eventSizes() string {
	parts := make([]string, len(h.Types))
	for i, t := range h.Types {
		parts[i] = t
		if i < len(h.EventBytes) {
			parts[i] += fmt.Sprintf(" %d", h.EventBytes[i])
		}
	}
	return strings.Join(parts, ", ")
}
