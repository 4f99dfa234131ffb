package gateclient

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/abde64c9/courier/gate"
	"github.com/abde64c9/courier/reviewproof"
)

// Sign is the proof of change c (its action, reason and until) at dest by
// the reviewer name with key, good for ttl: it reads the gate's state now,
// as the gate will compare it, so the proof is good only until the gate
// changes state. A gate with none yet is a closed one that never changed.
func (o Operator) Sign(ctx context.Context, dest string, c reviewproof.GateChange, name string, key ed25519.PrivateKey, ttl time.Duration) (string, error) {
	st, err := Read(ctx, o.C, o.DC, dest)
	if err != nil {
		return "", err
	}
	if st == nil {
		st = &gate.DestinationState{Name: dest, State: gate.Closed}
	}
	c.Destination = dest
	c.State, c.Since = gate.SignedState(*st)
	return reviewproof.SignGate(key, name, c, time.Now(), ttl)
}
