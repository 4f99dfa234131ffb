package starter

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/abde64c9/courier/reviewproof"
	"github.com/abde64c9/courier/workflows"
)

// Signer makes review decisions' proofs as one keyed reviewer (its name is
// the key id the destinations file lists with its public key).
type Signer struct {
	Name string
	Key  ed25519.PrivateKey
	// TTL is how long a proof stays good; DefaultProofTTL when zero.
	TTL time.Duration
}

// DefaultProofTTL is long enough to paste a decision into the web UI, and
// short enough that a leaked one is soon worth nothing.
const DefaultProofTTL = 15 * time.Minute

func (sg Signer) ttl() time.Duration {
	if sg.TTL == 0 {
		return DefaultProofTTL
	}
	return sg.TTL
}

// Sign returns d with sg's proof for the delivery key as it is parked now:
// its destination and the time it parked come from its status. Errors:
// ErrUnknownKey, *NotAwaitingReviewError, *InvalidRequestError.
func (s *Client) Sign(ctx context.Context, key string, d workflows.ReviewDecision, sg Signer) (workflows.ReviewDecision, error) {
	if err := d.Validate(); err != nil {
		return d, &InvalidRequestError{err}
	}
	st, err := s.Status(ctx, key)
	if err != nil {
		return d, err
	}
	if st.State != workflows.StateAwaitingReview || st.Review == nil {
		return d, &NotAwaitingReviewError{Key: key, State: st.State, Ended: st.Ended}
	}
	d.Proof, err = reviewproof.Sign(sg.Key, sg.Name, reviewproof.Decision{
		Key: st.Key, Destination: st.Operation.Destination, Parked: st.Review.Requested,
		Decision: d.Decision, ResourceID: d.ResourceID, Note: d.Note,
	}, time.Now(), sg.ttl())
	if err != nil {
		return d, &InvalidRequestError{err}
	}
	return d, nil
}
