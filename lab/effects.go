package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/abde64c9/courier/destination/sqldest"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab/sandbox"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// Effect is one effect a destination stored.
type Effect struct {
	Dest       string
	ID         string // the ticket id or resource id the destination gave it
	Key        string // the key stored with it, when the destination keeps one
	BusinessID string
}

// Effects counts what the destinations stored, from their own stores (the
// sandbox's database, each SQL destination's table), never from what
// Courier reports.
type Effects struct {
	sandbox   *sandbox.Server
	services  map[string][]string // sandbox service -> destinations served by it
	serviceOf map[string]string   // destination -> its sandbox service
	sql       map[string]*sqldest.Adapter
}

// OpenEffects reads the destinations of cfg: its HTTP ones at sb, its SQL
// ones through a connection of their own, like any other client.
func OpenEffects(sb *sandbox.Server, cfg destinations.Config) (*Effects, error) {
	e := &Effects{sandbox: sb, services: map[string][]string{}, serviceOf: map[string]string{}, sql: map[string]*sqldest.Adapter{}}
	for _, name := range cfg.Names() {
		d := cfg.Destinations[name]
		switch d.Adapter {
		case destinations.AdapterSQL:
			ad, err := sqldest.Open(name, d, nil)
			if err != nil {
				e.Close()
				return nil, err
			}
			e.sql[name] = ad
		case destinations.AdapterHTTP:
			if svc := SandboxService(d); svc != "" {
				e.services[svc] = append(e.services[svc], name)
				e.serviceOf[name] = svc
			}
		}
	}
	return e, nil
}

// All is every stored effect, by business id. An effect at a sandbox
// service several destinations share is listed under the first of them.
func (e *Effects) All(ctx context.Context) (map[string][]Effect, error) {
	out := map[string][]Effect{}
	svcs := make([]string, 0, len(e.services))
	for svc := range e.services {
		svcs = append(svcs, svc)
	}
	sort.Strings(svcs)
	for _, svc := range svcs {
		recs, err := e.sandbox.Records(svc)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			bid := TicketBusinessID(r.Payload)
			out[bid] = append(out[bid], Effect{Dest: e.services[svc][0], ID: r.TicketID, Key: r.Key, BusinessID: bid})
		}
	}
	for name, ad := range e.sql {
		rows, err := ad.Rows(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range rows {
			out[r.BusinessID] = append(out[r.BusinessID], Effect{Dest: name, ID: r.ResourceID, Key: r.Key, BusinessID: r.BusinessID})
		}
	}
	return out, nil
}

// Count is how many effects dest's store holds for businessID (a sandbox
// service counts for every destination it serves).
func (e *Effects) Count(ctx context.Context, dest, businessID string) (int, error) {
	all, err := e.All(ctx)
	n := 0
	for _, eff := range all[businessID] {
		if svc := e.serviceOf[dest]; eff.Dest == dest || (svc != "" && svc == e.serviceOf[eff.Dest]) {
			n++
		}
	}
	return n, err
}

// Close closes the SQL connections.
func (e *Effects) Close() {
	for _, ad := range e.sql {
		_ = ad.Close()
	}
}

// Ticket is a sandbox payload for one business id.
func Ticket(businessID, subject string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"request_id": businessID, "subject": subject})
	return b
}

// TicketBusinessID is the business id a Ticket payload carries.
func TicketBusinessID(payload []byte) string {
	var p struct {
		RequestID string `json:"request_id"`
	}
	_ = json.Unmarshal(payload, &p)
	return p.RequestID
}

// CreatedAndParked delivers two tickets a test can look for: one created at
// the sandbox's helpdesk, one parked for review at its legacy service (its
// response lost after the commit). ids names them.
func CreatedAndParked(ctx context.Context, st *starter.Client, sb *sandbox.Server, ids [2]string) (created, parked workflows.DeliveryStatus, err error) {
	if created, err = st.Deliver(ctx, TicketInput(DestHelpdesk, ids[0])); err != nil || created.Status != workflows.StatusCreated {
		return created, parked, errors.Join(err, fmt.Errorf("%s: %s, want created", ids[0], created.Status))
	}
	if err = sb.Inject(DestLegacy, sandbox.Fault{Kind: sandbox.FaultCloseAfterCommit}); err != nil {
		return created, parked, err
	}
	if parked, err = st.Deliver(ctx, TicketInput(DestLegacy, ids[1])); err == nil && parked.State != workflows.StateAwaitingReview {
		err = fmt.Errorf("%s: %s, want awaiting review", ids[1], parked.State)
	}
	return created, parked, err
}

// Input is a delivery of payload for (acme, dest, create-ticket, id).
func Input(dest, id string, payload json.RawMessage) workflows.DeliveryInput {
	return workflows.DeliveryInput{
		Operation: opkey.Operation{Tenant: "acme", Destination: dest, Operation: "create-ticket", BusinessID: id},
		Payload:   payload,
	}
}

// TicketInput is a delivery of a Ticket for id to dest.
func TicketInput(dest, id string) workflows.DeliveryInput {
	return workflows.DeliveryInput{
		Operation: opkey.Operation{Destination: dest, Operation: "create-ticket", BusinessID: id},
		Payload:   Ticket(id, "lab ticket "+id),
	}
}
