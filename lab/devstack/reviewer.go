package devstack

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/reviewproof"
)

// The dev stack's reviewer: one local identity, made on first use and kept
// in the state folder, whose key the dev destinations file lists for legacy.
const (
	ReviewerName = "you"
	ReviewerKey  = "reviewer.key"
)

// reviewerKey reads the dev reviewer's key from dir, creating it on first
// use.
func reviewerKey(dir string) (ed25519.PrivateKey, error) {
	path := filepath.Join(dir, ReviewerKey)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		_, key, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		if b, err = json.MarshalIndent(reviewproof.NewKeyFile(ReviewerName, key), "", "  "); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
			return nil, fmt.Errorf("dev reviewer key: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dev reviewer key: %w", err)
	}
	name, key, err := reviewproof.ParseKeyFile(b)
	if err != nil || name != ReviewerName {
		return nil, fmt.Errorf("dev reviewer key %s: not the dev reviewer's (%v): remove it and start again", path, err)
	}
	return key, nil
}

// signedReviews makes legacy's decisions signed ones, by the dev reviewer,
// as production declares its reviewers' keys.
func signedReviews(cfg *destinations.Config, dir string) error {
	key, err := reviewerKey(dir)
	if err != nil {
		return err
	}
	d, ok := cfg.Destinations[lab.DestLegacy]
	if !ok {
		return nil
	}
	d.Reviewers = destinations.Reviewers{{
		// The dev operator is the reviewer: pausing legacy is signed too.
		Name: ReviewerName, Key: reviewproof.FormatPublicKey(key.Public().(ed25519.PublicKey)),
		Decisions: slices.Concat(reviewproof.Decisions, reviewproof.GateActions),
	}}
	cfg.Destinations[lab.DestLegacy] = d
	return nil
}
