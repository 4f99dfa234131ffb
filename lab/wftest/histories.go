// Package wftest is what the workflows' own tests share with the end-to-end
// testsuite and the history recorder: the recorded histories' index, and
// running a delivery in the SDK's test workflow environment. Test support
// only: tests and the recorder import it, no service or worker links it.
package wftest

// HistoriesDir holds the recorded history sets, one folder per set, from
// the repository root: lab/testsuite/record writes them, the replay tests in
// workflows read them.
const HistoriesDir = "workflows/testdata/histories"

// HistoryIndexFile lists, per fault case, the histories recorded for the
// replay test (in each set's folder, written by lab/testsuite/record).
const HistoryIndexFile = "index.json"

// RecordedCase is one line of the history index.
type RecordedCase struct {
	Seed      string            `json:"seed"`
	Case      string            `json:"case"`
	Histories []RecordedHistory `json:"histories"`
}

// RecordedHistory names a history file and its execution: the replayer
// needs the real workflow ID, which the Delivery workflow checks.
type RecordedHistory struct {
	File       string `json:"file"`
	WorkflowID string `json:"workflow_id"`
	RunID      string `json:"run_id"`
}
