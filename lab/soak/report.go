package soak

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/abde64c9/courier/contract"
)

// WriteTable prints the summary as a table for people.
func (s Summary) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, v any, detail string) { fmt.Fprintf(tw, "%s\t%v\t%s\n", name, v, detail) }
	var kinds []string
	for _, k := range []contract.Dedup{contract.DedupKey, contract.DedupUniqueCommit, contract.DedupLookup, contract.DedupNone} {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, s.ByDedup[k]))
	}
	f := s.Faults
	row("server", s.Temporal.Address, s.Temporal.Kind()+", namespace "+s.Temporal.Namespace)
	row("deliveries", s.Deliveries, strings.Join(kinds, ", "))
	row("faults injected", f.Total(), fmt.Sprintf("close after commit %d, delay after commit %d, delay before commit %d, 503 bursts %d, validation %d",
		f.CloseAfterCommit, f.DelayAfterCommit, f.DelayBeforeCommit, f.Fail503Bursts, f.Validation))
	row("faults applied", sum(s.FaultsApplied), "requests hit, from the sandbox's logs: "+line(s.FaultsApplied))
	row("worker kills", s.WorkerKills, fmt.Sprintf("SIGKILL of 2 worker processes; %d attempts lost with them or to timeouts; "+
		"%d exits on their own (no server to reach), restarted", s.AttemptsLost, s.WorkerExits))
	how := "same SQLite file and port"
	switch s.ServerRestart {
	case RestartByCommand:
		how = fmt.Sprintf("by the command %q", s.RestartCommand)
	case RestartNone:
		how = "none: an external server and no command to restart it"
	}
	row("server restarts", s.ServerRestarts, fmt.Sprintf("%s; %d start retries", how, s.StartRetries))
	row("effects", s.Effects, "stored by the destinations")
	row("duplicates", s.Duplicates, fmt.Sprintf("reviewed repeats on none: %d", s.ReviewedRepeats))
	row("lost", s.Lost, "")
	row("reviews", s.Reviews, line(s.ReviewsBy))
	row("statuses", sum(s.Statuses), line(s.Statuses))
	row("violations", len(s.Violations), "")
	row("wall time", (time.Duration(s.WallSeconds * float64(time.Second))).Round(time.Second), fmt.Sprintf("seed %d", s.Seed))
	if err := tw.Flush(); err != nil {
		return err
	}
	for i, v := range s.Violations {
		if i == 20 {
			fmt.Fprintf(w, "... and %d more\n", len(s.Violations)-i)
			break
		}
		fmt.Fprintln(w, "violation:", v)
	}
	if s.Dir != "" {
		fmt.Fprintln(w, "files and logs kept in", s.Dir)
	}
	return nil
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func line(m map[string]int) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
