package gate

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/reviewproof"
)

// verify checks a pause's or resume's proof against the policy recorded
// with the terms and the workflow's clock alone, so replay decides alike;
// it runs in the handler, after authorize resolved the terms, since a
// validator cannot run the local activity that records them. It returns
// the verified principal and leaves the policy's rule for the transition.
func (g *gate) verify(ctx workflow.Context, proof string, c reviewproof.GateChange) (string, error) {
	c.Destination = g.s.Name
	c.State, c.Since = SignedState(g.s)
	v, err := reviewproof.VerifyGate(proof, c, *g.terms.Policy, workflow.Now(ctx))
	if err != nil {
		g.logger(ctx).Warn("gate change refused", "action", c.Action, "error", err)
		return "", temporal.NewApplicationError(c.Action+" refused: "+err.Error(), ErrInvalidChange)
	}
	g.principal, g.policy = v.Principal, v.Policy
	return v.Principal, nil
}

// SignedState is the gate's state a pause or resume proof answers: its
// state and since when, with no time for a gate that never changed (the
// signer cannot know when a gate it has not yet seen started). A proof is
// then good only until the gate changes state.
func SignedState(s DestinationState) (string, time.Time) {
	if len(s.Transitions) == 0 {
		return s.State, time.Time{}
	}
	return s.State, s.Since
}
