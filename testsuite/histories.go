package testsuite

// HistoryIndexFile lists, per fault case, the histories recorded for the
// replay test (testsuite/testdata/histories, written by testsuite/record).
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
