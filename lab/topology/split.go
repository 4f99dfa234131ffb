package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/deploy"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// The split phase: deliveries started through both frontends, half each,
// while node 2 is SIGKILLed; node 2 is started again once they have all
// settled, and a few more go through it.
const (
	splitDeliveries  = 200
	splitRate        = 10 // started per second
	splitKillAfter   = 70 // deliveries started before the kill
	rejoinDeliveries = 10
	splitNamespace   = "courier-split"
	// callWithin bounds one Deliver call; a call that fails or times out is
	// sent again, through the other frontend (as a load balancer would).
	callWithin = 15 * time.Second
)

// splitDests are one destination per dedup kind; legacy (none) parks an
// unknown outcome for the reviewer.
var splitDests = lab.OneOfEachDedup

// splitBudget has room for attempts lost with a node.
var splitBudget = lab.OutageBudget

type splitRun struct {
	t        *topo
	nodes    [2]deploy.Node
	starters [2]*starter.Client
	effects  *lab.Effects
	cfg      destinations.Config

	mu         sync.Mutex
	deliveries []*splitDelivery
	byKey      map[string]*splitDelivery
	rerouted   int
	reviews    int
}

type splitDelivery struct {
	in   workflows.DeliveryInput
	key  string
	via  int // the node its first call went to, 0 or 1
	took time.Duration
	err  error
}

// split runs the phase and makes its row.
func (t *topo) split(ctx context.Context) row {
	r := row{phase: "two nodes, node 2 SIGKILLed", kills: "1 node", duplicates: "?", lost: "?", takeover: "?",
		deliveries: fmt.Sprintf("%d + %d", splitDeliveries, rejoinDeliveries)}
	ctx, cancel := context.WithTimeout(ctx, splitWithin)
	defer cancel()
	if err := t.runSplit(ctx, &r); err != nil {
		r.pass = false
		r.notes = append(r.notes, "split: "+err.Error())
	}
	return r
}

func (t *topo) runSplit(ctx context.Context, r *row) error {
	s := &splitRun{t: t, byKey: map[string]*splitDelivery{}}
	for i := range s.nodes {
		s.nodes[i], _ = deploy.TopologyNode(i + 1)
	}
	dir := filepath.Join(t.dir, "split")
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sb, err := lab.StartSandbox(filepath.Join(dir, lab.SandboxDB), "", nil)
	if err != nil {
		return err
	}
	defer sb.Close()
	s.cfg = lab.Destinations(sb.URL, filepath.Join(dir, lab.LedgerDB), splitBudget)
	dests := filepath.Join(dir, lab.DestinationsFile)
	if err := lab.WriteDestinations(dests, s.cfg); err != nil {
		return err
	}
	if s.effects, err = lab.OpenEffects(sb.Server, s.cfg); err != nil {
		return err
	}
	defer s.effects.Close()
	logf, err := os.Create(filepath.Join(dir, "workers.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	courier := filepath.Join(t.dir, "courier")
	admin, err := lab.ReadToken(t.issuerDir(), "admin")
	if err != nil {
		return err
	}
	for i, n := range s.nodes {
		tmp, err := connectLab(ctx, n, splitNamespace, admin)
		if err != nil {
			return err
		}
		defer tmp.Close()
		s.starters[i] = starter.New(tmp.Client())
		// One worker per frontend: node 2's loses its server with it.
		w, err := lab.StartWorker(ctx, lab.WorkerOptions{Courier: courier, Destinations: dests, Temporal: tmp,
			Env:  []string{"TEMPORAL_ADDRESS=" + n.FrontendAddr(), "TEMPORAL_NAMESPACE=" + splitNamespace},
			Args: []string{"--log-level", "warn"}, Log: logf})
		if err != nil {
			return err
		}
		defer w.Stop(workerGrace)
	}
	say("split: %d deliveries at %d/s through both frontends in %s; node 2 SIGKILLed after %d", splitDeliveries, splitRate, splitNamespace, splitKillAfter)

	rctx, stopReviewer := context.WithCancel(ctx)
	reviewerDone := make(chan struct{})
	go func() {
		defer close(reviewerDone)
		(&lab.Reviewer{Starter: s.starters[0], Effects: s.effects, Name: "topology-test", Settle: 2 * time.Second,
			Only:    func(key string) bool { s.mu.Lock(); defer s.mu.Unlock(); return s.byKey[key] != nil },
			Decided: func(string, workflows.ReviewDecision) { s.mu.Lock(); s.reviews++; s.mu.Unlock() },
		}).Run(rctx)
	}()
	defer func() { stopReviewer(); <-reviewerDone }()

	run := uuid.NewString()[:8]
	var killed nodeKill
	var took time.Duration
	var killErr error
	var killDone sync.WaitGroup
	s.deliverAll(ctx, run, splitDeliveries, func(i int) int { return i % 2 }, func() {
		killDone.Add(1)
		go func() {
			defer killDone.Done()
			if killed, killErr = t.killNode(ctx, s.nodes[1]); killErr == nil {
				took, killErr = killed.awaitTakeover(ctx)
			}
		}()
	})
	killDone.Wait()
	if killErr != nil {
		return killErr
	}
	r.takeover = takeoverText(took.Seconds(), len(killed.owned))
	if len(killed.owned) == 0 {
		r.notes = append(r.notes, "split: node 2 owned no shard at its kill: nothing to take over")
	}

	say("split: node 2 started again; %d deliveries through it", rejoinDeliveries)
	if _, err := t.startNode(ctx, s.nodes[1]); err != nil {
		return err
	}
	s.deliverAll(ctx, run+"-rejoin", rejoinDeliveries, func(int) int { return 1 }, nil)
	return s.check(ctx, r)
}

// deliverAll makes n deliveries at splitRate, the i-th first through node
// via(i), and calls atKill (if set) once splitKillAfter have started.
func (s *splitRun) deliverAll(ctx context.Context, run string, n int, via func(int) int, atKill func()) {
	tick := time.NewTicker(time.Second / splitRate)
	defer tick.Stop()
	var wg sync.WaitGroup
	for i := range n {
		if i == splitKillAfter && atKill != nil {
			atKill()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
		id := fmt.Sprintf("split-%s-%03d", run, i)
		dest := splitDests[i%len(splitDests)]
		d := &splitDelivery{via: via(i), in: workflows.DeliveryInput{
			Operation: opkey.Operation{Tenant: "topology", Destination: dest, Operation: "create-ticket", BusinessID: id},
			Payload:   lab.Ticket(id, "split delivery"),
		}}
		d.key = opkey.Key(d.in.Operation)
		s.mu.Lock()
		s.deliveries = append(s.deliveries, d)
		s.byKey[d.key] = d
		s.mu.Unlock()
		wg.Add(1)
		go func() { defer wg.Done(); s.deliver(ctx, d) }()
	}
	wg.Wait()
}

// deliver calls Deliver until it answers, switching frontend after each
// failed call: a second call joins the first, so nothing is sent twice.
func (s *splitRun) deliver(ctx context.Context, d *splitDelivery) {
	began := time.Now()
	node := d.via
	for {
		cctx, cancel := context.WithTimeout(ctx, callWithin)
		_, err := s.starters[node].Deliver(cctx, d.in)
		cancel()
		var invalid *starter.InvalidRequestError
		var conflict *starter.ConflictError
		switch {
		case err == nil:
			d.took = time.Since(began)
			return
		case errors.As(err, &invalid), errors.As(err, &conflict), ctx.Err() != nil:
			d.err = err
			return
		}
		node = 1 - node
		s.mu.Lock()
		s.rerouted++
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// check waits for parked deliveries to be decided, then holds every
// delivery's end against the effects its destination stored.
func (s *splitRun) check(ctx context.Context, r *row) error {
	results := map[string]workflows.DeliveryResult{}
	for {
		var open int
		for _, d := range s.deliveries {
			if _, ok := results[d.key]; ok || d.err != nil {
				continue
			}
			st, err := s.starters[0].Status(ctx, d.key)
			if err == nil && st.Status != "" {
				results[d.key] = st.DeliveryResult
				continue
			}
			open++
		}
		if open == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d deliveries not final at the time limit", open)
		case <-time.After(time.Second):
		}
	}
	effects, err := s.effects.All(ctx)
	if err != nil {
		return err
	}
	var dups, lost int
	statuses := map[string]int{}
	var longest time.Duration
	viaNode := [2]int{}
	for _, d := range s.deliveries {
		viaNode[d.via]++
		longest = max(longest, d.took)
		if d.err != nil {
			lost++
			r.notes = append(r.notes, fmt.Sprintf("split: %s never answered: %v", d.in.BusinessID, d.err))
			continue
		}
		res := results[d.key]
		statuses[string(res.Status)]++
		n := len(effects[d.in.BusinessID])
		allowed := 1
		if s.cfg.Destinations[d.in.Destination].Contract.Dedup == contract.DedupNone && res.Review != nil {
			for _, rec := range res.Review.Decisions {
				if rec.Accepted && rec.Decision == workflows.DecisionRetry {
					allowed++
				}
			}
		}
		if n > allowed {
			dups += n - allowed
			r.notes = append(r.notes, fmt.Sprintf("split: %s (%s): %d effects", d.in.BusinessID, d.in.Destination, n))
		}
		switch res.Status {
		case workflows.StatusCreated, workflows.StatusDuplicate, workflows.StatusDeliveredByReview:
			if n == 0 {
				lost++
				r.notes = append(r.notes, fmt.Sprintf("split: %s (%s) %s, but the destination holds no effect", d.in.BusinessID, d.in.Destination, res.Status))
			}
		case workflows.StatusRejected, workflows.StatusAttemptLimit:
			if n > 0 {
				lost++
				r.notes = append(r.notes, fmt.Sprintf("split: %s (%s) %s, but the destination holds its effect", d.in.BusinessID, d.in.Destination, res.Status))
			}
		default:
			lost++
			r.notes = append(r.notes, fmt.Sprintf("split: %s (%s) ended %s: %s", d.in.BusinessID, d.in.Destination, res.Status, res.Error))
		}
	}
	for bid := range effects {
		if !slices.ContainsFunc(s.deliveries, func(d *splitDelivery) bool { return d.in.BusinessID == bid }) {
			r.notes = append(r.notes, fmt.Sprintf("split: an effect for %q, which no delivery made", bid))
			dups++
		}
	}
	r.duplicates, r.lost = fmt.Sprint(dups), fmt.Sprint(lost)
	r.notes = append(r.notes, fmt.Sprintf("split: %s; first calls %d via node 1, %d via node 2, %d calls sent again through the other frontend; %d review decisions; longest delivery %s",
		statusLine(statuses), viaNode[0], viaNode[1], s.rerouted, s.reviews, longest.Round(100*time.Millisecond)))
	r.pass = dups == 0 && lost == 0
	return nil
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
