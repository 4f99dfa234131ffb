package starter

import (
	"context"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/gate/gateclient"
	"github.com/abde64c9/courier/reviewproof"
)

// The destinations' gates are operated by package gateclient; these keep
// the starter the one client the CLI and the tests hold.

func (s *Client) gates() gateclient.Operator { return gateclient.Operator{C: s.c, DC: s.dc} }

// Pause pauses a destination for every worker; see gateclient.Operator.Pause.
func (s *Client) Pause(ctx context.Context, dest string, r gate.PauseRequest) (gate.DestinationState, error) {
	return s.gates().Pause(ctx, dest, r)
}

// Resume resumes a destination; see gateclient.Operator.Resume.
func (s *Client) Resume(ctx context.Context, dest string, r gate.ResumeRequest) (gate.DestinationState, error) {
	return s.gates().Resume(ctx, dest, r)
}

// Destination reads a destination's gate from its memo, with no worker
// needed; see gateclient.Operator.Status.
func (s *Client) Destination(ctx context.Context, dest string) (gateclient.Status, error) {
	return s.gates().Status(ctx, dest)
}

// Destinations lists the destinations that have a gate; see
// gateclient.Operator.List.
func (s *Client) Destinations(ctx context.Context) ([]string, error) {
	return s.gates().List(ctx)
}

// Desk reads the status of the named destinations, or of every one cfg
// configures and every one with a gate; see gateclient.Operator.Desk.
func (s *Client) Desk(ctx context.Context, cfg *destinations.Config, names ...string) ([]gateclient.Status, error) {
	return s.gates().Desk(ctx, cfg, names...)
}

// SignPause returns r with sg's proof of pausing dest as its gate is now,
// by sg's name; for a destination whose reviewers have keys.
func (s *Client) SignPause(ctx context.Context, dest string, r gate.PauseRequest, sg Signer) (gate.PauseRequest, error) {
	var err error
	r.By = sg.Name
	r.Proof, err = s.gates().Sign(ctx, dest, reviewproof.GateChange{Action: reviewproof.ActionPause, Reason: r.Reason, Until: r.Until},
		sg.Name, sg.Key, sg.ttl())
	return r, err
}

// SignResume returns r with sg's proof of resuming dest as its gate is now.
func (s *Client) SignResume(ctx context.Context, dest string, r gate.ResumeRequest, sg Signer) (gate.ResumeRequest, error) {
	var err error
	r.By = sg.Name
	r.Proof, err = s.gates().Sign(ctx, dest, reviewproof.GateChange{Action: reviewproof.ActionResume, Reason: r.Note},
		sg.Name, sg.Key, sg.ttl())
	return r, err
}
