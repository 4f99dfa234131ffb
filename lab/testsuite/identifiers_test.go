package testsuite

// Identifiers are plain: a tenant, destination, operation or business id
// with a control or bidirectional formatting character is refused by the
// starter and the CLI, and ends rejected in the workflow when started
// another way; a value that makes a URL path segment . or .. ends rejected
// at the attempt, with nothing sent.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// versionPlainIdentifiers is the workflow's change ID for the rule.
const versionPlainIdentifiers = "plain-identifiers"

// IdentifiersSuite runs deliveries whose identifiers are not plain text in
// the test environment, against the real helpdesk destination.
type IdentifiersSuite struct{ envSuite }

func TestIdentifiers(t *testing.T) { suite.Run(t, new(IdentifiersSuite)) }

func (s *IdentifiersSuite) SetupTest() {
	s.envSuite.SetupTest()
	worker.Register(s.env, s.dest.Config, s.dest.Activities)
}

func (s *IdentifiersSuite) start(in workflows.DeliveryInput) workflows.DeliveryResult {
	s.env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: workflows.WorkflowID(opkey.Key(in.Operation))})
	return s.execute(in)
}

// rejects: the delivery of in ends rejected before any attempt, its error
// want, and nothing reached the destination.
func (s *IdentifiersSuite) rejects(in workflows.DeliveryInput, want string) {
	res := s.start(in)
	s.Equal(workflows.StatusRejected, res.Status)
	s.Equal(want, res.Error)
	s.Empty(res.Attempts)
	s.Empty(s.dest.Sandbox.Requests(lab.DestHelpdesk), "nothing was sent")
}

func (s *IdentifiersSuite) TestBusinessIDWithRightToLeftOverride() {
	s.rejects(lab.Input(lab.DestHelpdesk, "invoice-\u202efdp.exe", lab.Ticket("invoice", "Reversed")),
		"business_id: bidirectional formatting character U+202E at offset 8: identifiers are plain text; remove it")
}

func (s *IdentifiersSuite) TestTenantWithLineBreak() {
	in := lab.Input(lab.DestHelpdesk, "order-7", lab.Ticket("order-7", "Forged line"))
	in.Tenant = "acme\r\nlevel=ERROR"
	s.rejects(in, "tenant: control character U+000D at offset 4: identifiers are plain text; remove it")
}

// TestDestinationIsAnIdentifier: checked before the workers are asked for
// the destination.
func (s *IdentifiersSuite) TestDestinationIsAnIdentifier() {
	s.rejects(lab.Input(lab.DestHelpdesk+"\u2066", "order-8", lab.Ticket("order-8", "Isolate")),
		"destination: bidirectional formatting character U+2066 at offset 8: identifiers are plain text; remove it")
}

// TestStartedBeforeTheRuleDelivers: a delivery whose history has no marker
// (it was started before the rule) delivers as it did then; replay of
// such a history is TestReplayBeforePlainIdentifiers, in workflows.
func (s *IdentifiersSuite) TestStartedBeforeTheRuleDelivers() {
	s.env.OnGetVersion(versionPlainIdentifiers, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion).Once()
	id := "invoice-\u202efdp.exe"
	res := s.start(lab.Input(lab.DestHelpdesk, id, lab.Ticket(id, "Reversed")))
	s.Equal(workflows.StatusCreated, res.Status)
	n, err := s.dest.Effects(lab.DestHelpdesk, id)
	s.Require().NoError(err)
	s.Equal(1, n)
}

// TestPlainIdentifiersAskNoVersion: the rule writes no marker into the
// history of a delivery whose identifiers are plain.
func (s *IdentifiersSuite) TestPlainIdentifiersAskNoVersion() {
	s.env.OnGetVersion(versionPlainIdentifiers, workflow.DefaultVersion, 1).Never()
	res := s.start(lab.Input(lab.DestHelpdesk, "Zürich-商店 7", lab.Ticket("zurich", "Plain")))
	s.Equal(workflows.StatusCreated, res.Status)
}

// TestRealPlainIdentifiers, against a real dev server, a real `courier
// worker` and the sandbox: a business id of . or .. at a destination that
// puts it in its URL path ends rejected and reaches nothing; identifiers
// that are not plain text are refused by the starter, and started by hand
// end rejected before any attempt.
func TestRealPlainIdentifiers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := sharedServer(t)
	run := uuid.NewString()[:8]
	dir := t.TempDir()
	sb, examples := dialectSandbox(t, dir)
	var cfg destinations.Config
	for _, ex := range examples {
		if filepath.Base(ex.File) == "put-by-business-id.json" {
			cfg = ex.Config
		}
	}
	const dest = "things"
	require.Contains(t, cfg.Destinations, dest)
	require.Contains(t, cfg.Destinations[dest].URL, "/{business_id}", "the example puts the business id in the path")
	// Every request sent to the partner passes this front, which counts it
	// whatever path it names.
	front := newOutage(t, sb.URL)
	d := cfg.Destinations[dest]
	d.URL = strings.Replace(d.URL, sb.URL, front.srv.URL, 1)
	cfg.Destinations[dest] = d
	cfgPath := filepath.Join(dir, lab.DestinationsFile)
	require.NoError(t, lab.WriteDestinations(cfgPath, cfg))
	effects, err := lab.OpenEffects(sb.Server, cfg)
	require.NoError(t, err)
	defer effects.Close()

	loggedWorker(ctx, t, srv, cfgPath, dir)
	c, st := srv.Client(), starter.New(srv.Client())
	service := lab.SandboxService(cfg.Destinations[dest])
	sent := func() int { return len(sb.Requests(service)) }
	stored := func(id string) int {
		t.Helper()
		n, err := effects.Count(ctx, dest, id)
		require.NoError(t, err)
		return n
	}
	// The server's namespace has Courier's search attributes from its start
	// (a new one may not, for a minute). The tenant makes each key new.
	input := func(tenant, id string) workflows.DeliveryInput {
		in := lab.TicketInput(dest, id)
		in.Tenant = tenant + "-" + run
		return in
	}

	t.Run("dot segments", func(t *testing.T) {
		for _, id := range []string{"..", "."} {
			before := sent()
			res, err := st.Deliver(ctx, input("acme", id))
			require.NoError(t, err)
			require.Equal(t, workflows.StatusRejected, res.Status, "%+v", res.Attempts)
			require.Equal(t, `not sent: url: placeholder {business_id}: "`+id+`": a path segment of . or .. names another resource; `+
				`use another value, or put the placeholder in the query`, res.Error)
			require.Len(t, res.Attempts, 1)
			require.Equal(t, contract.ClassRejected, res.Attempts[0].Class)
			require.True(t, res.LeftNoEffect(), "a corrected request may be sent")
			require.Equal(t, before, sent(), "no request reached the sandbox")
			require.Zero(t, stored(id))
		}
		all, err := effects.All(ctx)
		require.NoError(t, err)
		require.Empty(t, all, "the sandbox stored nothing, under any id")

		// Dots that are not a whole segment are a name like any other.
		res, err := st.Deliver(ctx, input("acme", "..."))
		require.NoError(t, err)
		require.Equal(t, workflows.StatusCreated, res.Status, "%+v", res.Attempts)
		require.Equal(t, 1, stored("..."))
	})

	t.Run("values that leave their segment", func(t *testing.T) {
		for _, id := range []string{"../admin", "..%2Fadmin", "a/b", `a\b`} {
			before := front.requests()
			res, err := st.Deliver(ctx, input("acme", id))
			require.NoError(t, err)
			require.Equal(t, workflows.StatusRejected, res.Status, "%s: %+v", id, res.Attempts)
			require.Equal(t, fmt.Sprintf(`not sent: url: placeholder {business_id}: %q holds a / or \ or decodes to . or ..: `+
				`a proxy that decodes it before resolving the path sends the request to another resource; `+
				`use another value, or put the placeholder in the query`, id), res.Error)
			require.True(t, res.LeftNoEffect(), "a corrected request may be sent")
			require.Equal(t, before, front.requests(), "%s: the partner received no request", id)
			require.Zero(t, stored(id))
		}
	})

	refused := []struct {
		name, tenant, id, want string
	}{
		{"right-to-left override in the business id", "acme", "invoice-\u202efdp.exe",
			"business_id: bidirectional formatting character U+202E at offset 8: identifiers are plain text; remove it"},
		{"line break in the business id", "acme", "order-7\r\nlevel=INFO msg=delivered",
			"business_id: control character U+000D at offset 7: identifiers are plain text; remove it"},
		{"NUL in the business id", "acme", "order\x00-10",
			"business_id: control character U+0000 at offset 5: identifiers are plain text; remove it"},
		{"line break in the tenant", "acme\r\n", "order-8",
			"tenant: control character U+000D at offset 4: identifiers are plain text; remove it"},
		{"right-to-left override in the tenant", "\u202eemca", "order-9",
			"tenant: bidirectional formatting character U+202E at offset 0: identifiers are plain text; remove it"},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			before := sent()
			in := input(r.tenant, r.id)
			key := opkey.Key(in.Operation)

			// The starter: refused before any workflow starts.
			_, err := st.Deliver(ctx, in)
			var invalid *starter.InvalidRequestError
			require.ErrorAs(t, err, &invalid)
			require.EqualError(t, err, "invalid request: "+r.want)
			_, err = st.Status(ctx, key)
			require.ErrorIs(t, err, starter.ErrUnknownKey, "a refused request starts nothing")
			_, err = c.DescribeWorkflowExecution(ctx, workflows.WorkflowID(key), "")
			var nf *serviceerror.NotFound
			require.ErrorAs(t, err, &nf)

			// By hand, as another SDK or the temporal CLI would: the
			// workflow ends rejected before any attempt.
			h, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.WorkflowID(key), TaskQueue: workflows.TaskQueue},
				workflows.WorkflowType, in)
			require.NoError(t, err)
			err = h.Get(ctx, nil)
			res, ok := workflows.UndeliveredResult(err)
			require.True(t, ok, "a rejected run fails with its result")
			_, ok = workflows.Failure(err, workflows.ErrNotDelivered)
			require.True(t, ok, "rejected before any attempt: nothing applied, so NotDelivered: %v", err)
			require.Equal(t, workflows.StatusRejected, res.Status)
			require.Equal(t, r.want, res.Error)
			require.Empty(t, res.Attempts)
			require.Equal(t, before, sent(), "no request reached the sandbox")
			require.Zero(t, stored(in.BusinessID))
		})
	}
}
