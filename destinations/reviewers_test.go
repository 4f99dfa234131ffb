package destinations

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/reviewproof"
)

func reviewersFile(top, legacy string) []byte {
	dest := `"adapter": "http", "url": "http://127.0.0.1:8081/legacy/tickets",
      "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}`
	if legacy != "" {
		dest = `"reviewers": ` + legacy + ",\n      " + dest
	}
	return []byte(fmt.Sprintf(`{
  "reviewers": %s,
  "destinations": {
    "legacy": {
      %s
    },
    "helpdesk": {"adapter": "http", "url": "http://127.0.0.1:8081/helpdesk/tickets",
      "contract": {"dedup": "key", "retry": {"max_attempts": 3, "attempt_timeout": "1s", "deadline": "1m"}}}
  }
}`, top, dest))
}

func TestReviewers(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	key := reviewproof.FormatPublicKey(pub)
	alice := fmt.Sprintf(`{"name": "alice", "key": %q, "decisions": ["retry", "delivered", "abandon"]}`, key)

	// Plain names, as before: the default for every destination, no policy.
	cfg, err := Parse(reviewersFile(`["ops", "bob"]`, ""))
	require.NoError(t, err)
	names, policy := cfg.ReviewersOf("legacy")
	require.Equal(t, []string{"ops", "bob"}, names)
	require.Nil(t, policy)

	// A destination's own keyed list overrides the plain default there only.
	cfg, err = Parse(reviewersFile(`["ops"]`, "["+alice+"]"))
	require.NoError(t, err)
	names, policy = cfg.ReviewersOf("legacy")
	require.Equal(t, []string{"alice"}, names)
	require.Equal(t, &reviewproof.Policy{Source: "legacy's reviewers", Reviewers: []reviewproof.Reviewer{
		{Name: "alice", Key: key, Decisions: []string{"retry", "delivered", "abandon"}}}}, policy)
	names, policy = cfg.ReviewersOf("helpdesk")
	require.Equal(t, []string{"ops"}, names)
	require.Nil(t, policy)

	// A keyed default is every destination's policy.
	cfg, err = Parse(reviewersFile("["+alice+"]", ""))
	require.NoError(t, err)
	_, policy = cfg.ReviewersOf("helpdesk")
	require.Equal(t, "the default reviewers", policy.Source)

	// The file writes back as it reads.
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	again, err := Parse(b)
	require.NoError(t, err)
	require.Equal(t, cfg.Reviewers, again.Reviewers)
	b, err = json.Marshal(Config{Reviewers: Plain("ops")})
	require.NoError(t, err)
	require.Contains(t, string(b), `"reviewers":["ops"]`)

	for _, c := range []struct{ name, top, legacy, want string }{
		{"bad key", `[{"name": "alice", "key": "ed25519:AAAA", "decisions": ["retry"]}]`, "",
			"reviewers (line 2): reviewers[0].key: 3 bytes; an Ed25519 public key has 32 (courier review keygen prints an entry)"},
		{"not a key", `[{"name": "alice", "key": "rsa:AAAA", "decisions": ["retry"]}]`, "", `does not start with "ed25519:"`},
		{"unknown decision", "", `[{"name": "alice", "key": "` + key + `", "decisions": ["retry", "approve"]}]`,
			`destination "legacy" (line 4): reviewers[0].decisions: "approve" unknown; use retry, delivered, abandon`},
		{"no decisions", `[{"name": "alice", "key": "` + key + `"}]`, "", "reviewers[0].decisions: missing"},
		{"duplicate name", "[" + alice + ", " + alice + "]", "", `reviewers[1]: name "alice" listed twice`},
		{"mixed", `["ops", ` + alice + "]", "", `reviewers[0]: "ops" is a plain name among keyed reviewers`},
		{"bad name", `[{"name": "al ice", "key": "` + key + `", "decisions": ["retry"]}]`, "", `reviewers[0].name: "al ice": 1 to 64 letters`},
		{"object without a key", `[{"name": "alice", "decisions": ["retry"]}]`, "", "reviewers[0]: key: missing"},
		{"unknown field", `[{"name": "alice", "key": "` + key + `", "decisions": ["retry"], "role": "x"}]`, "", `unknown field "role"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			top := c.top
			if top == "" {
				top = "[]"
			}
			_, err := Parse(reviewersFile(top, c.legacy))
			require.ErrorContains(t, err, c.want)
		})
	}
}
