package testsuite

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/abde64c9/courier/contract"
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destination/smtpdest"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/worker"
	"github.com/abde64c9/courier/workflows"
)

// SMTPSuite delivers mail through the real Delivery workflow (the SDK's
// test environment) to the lab's mail sink over loopback, with the smtp
// destination declared in a destinations file and opened by the worker.
type SMTPSuite struct {
	suite.Suite
	sdktest.WorkflowTestSuite
	sink *lab.MailSink
}

func TestSMTP(t *testing.T) { suite.Run(t, new(SMTPSuite)) }

func (s *SMTPSuite) SetupTest() {
	var err error
	s.sink, err = lab.StartMailSink(lab.MailSinkOptions{Dir: s.T().TempDir()})
	s.Require().NoError(err)
}

func (s *SMTPSuite) TearDownTest() { _ = s.sink.Close() }

// deliver runs one delivery to an smtp destination at addr, answering
// its review with decide.
func (s *SMTPSuite) deliver(addr, id string, decide Decider) Outcome {
	cfg, err := destinations.Parse([]byte(`{"destinations": {"mail": {"adapter": "smtp",
  "smtp": {"addr": "` + addr + `", "from": "courier@example.com", "to": ["ops@example.com"]},
  "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "10s", "deadline": "5m"}}}}}`))
	s.Require().NoError(err)
	ads, err := worker.OpenAdapters(cfg, nil)
	s.Require().NoError(err)
	defer ads.Close()
	acts := worker.NewActivities(nil, cfg, ads)
	acts.Runs = noEarlierRuns{}
	in := workflows.DeliveryInput{
		Operation: opkey.Operation{Tenant: "acme", Destination: "mail", Operation: "notify-shipped", BusinessID: id},
		Payload:   json.RawMessage(`{"subject": "Order ` + id + ` shipped", "text": "It left the warehouse."}`),
	}
	out, err := TestEnv{Env: &Env{Config: cfg, Activities: acts}, Suite: &s.WorkflowTestSuite}.Deliver(context.Background(), in, decide)
	s.Require().NoError(err)
	return out
}

func messageID(id string) string {
	return smtpdest.MessageID(opkey.Key(opkey.Operation{Tenant: "acme", Destination: "mail", Operation: "notify-shipped", BusinessID: id}),
		smtpdest.DefaultDomain)
}

func (s *SMTPSuite) TestCreated() {
	out := s.deliver(s.sink.Addr, "1042", nil)
	res := out.Result
	s.Require().Equal(workflows.StatusCreated, res.Status, res.Error)
	s.Require().Equal(messageID("1042"), res.Receipt.ResourceID)
	s.Require().Equal(1, s.sink.Count(res.Receipt.ResourceID))
	s.Require().Len(s.sink.Messages(), 1)
}

// TestLostAnswerAfterData: the sink keeps the mail and drops the
// connection before its 250. SMTP cannot deduplicate, so the delivery
// parks with one mail delivered; the reviewer finds it by its Message-ID
// and decides delivered, naming it.
func (s *SMTPSuite) TestLostAnswerAfterData() {
	s.sink.Inject(lab.MailDropAfterData)
	id := messageID("1043")
	var parked workflows.DeliveryStatus
	out := s.deliver(s.sink.Addr, "1043", func(st workflows.DeliveryStatus) *workflows.ReviewDecision {
		parked = st
		s.Require().Equal(1, s.sink.Count(id), "one mail when the delivery parks")
		return &workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "ops",
			Note: "found it in the mailbox", ResourceID: id}
	})
	s.Require().Equal(workflows.StateAwaitingReview, parked.State)
	s.Require().Len(parked.Attempts, 1)
	s.Require().Equal(contract.ClassUnknown, parked.Attempts[0].Class)
	s.Require().Contains(parked.Attempts[0].Error, "connection closed after the request was written")
	s.Require().Contains(parked.Review.Evidence, `attempt 1: unknown_outcome (connection closed after the request was written: `)
	s.Require().Contains(parked.Review.Evidence, `destination "mail" (dedup none) cannot deduplicate a retry`)
	res := out.Result
	s.Require().Equal(workflows.StatusDeliveredByReview, res.Status, res.Error)
	s.Require().Equal(id, res.Receipt.ResourceID)
	s.Require().Equal(destination.SourceReview, res.Receipt.Source)
	s.Require().Equal(1, s.sink.Count(id), "no second mail")
}

// TestRefusedDial: nobody listens, so every attempt is not sent and the
// budget ends it with no mail.
func (s *SMTPSuite) TestRefusedDial() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	s.Require().NoError(err)
	addr := ln.Addr().String()
	s.Require().NoError(ln.Close())
	res := s.deliver(addr, "1044", nil).Result
	s.Require().Equal(workflows.StatusAttemptLimit, res.Status, res.Error)
	s.Require().Len(res.Attempts, 3)
	for _, a := range res.Attempts {
		s.Require().Equal(contract.ClassNotSent, a.Class, a.Error)
	}
	s.Require().Contains(res.Error, "retry budget spent after 3 attempts; last: not_sent: not sent, failed before the request was written: dial tcp "+addr)
	s.Require().True(res.LeftNoEffect())
}

// TestRecipientRefused: a 550 to RCPT TO rejects the delivery at once,
// and nothing was sent.
func (s *SMTPSuite) TestRecipientRefused() {
	s.sink.Inject(lab.MailRejectRecipient)
	res := s.deliver(s.sink.Addr, "1045", nil).Result
	s.Require().Equal(workflows.StatusRejected, res.Status, res.Error)
	s.Require().Len(res.Attempts, 1)
	s.Require().Equal(550, res.Attempts[0].StatusCode)
	s.Require().Equal("the server refused RCPT TO ops@example.com, nothing sent: SMTP error 550: no such mailbox: ops@example.com", res.Error)
	s.Require().Empty(s.sink.Messages())
}

// TestRealSMTP delivers mail on the real dev server with a real `courier
// worker` process serving the smtp destination from its destinations file,
// counting the mails the sink kept: created with the Message-ID as resource
// id; a connection lost after the sink accepted DATA parks with one mail,
// and the reviewer's delivered decision naming the Message-ID ends it.
func TestRealSMTP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal server and a courier worker; run without -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := sharedServer(t)
	courier := courierPath(t)
	dir := t.TempDir()
	sink, err := lab.StartMailSink(lab.MailSinkOptions{Dir: filepath.Join(dir, "mail")})
	require.NoError(t, err)
	defer sink.Close()

	cfgPath := filepath.Join(dir, lab.DestinationsFile)
	require.NoError(t, os.WriteFile(cfgPath, []byte(`{"destinations": {"mail": {"adapter": "smtp",
  "smtp": {"addr": "`+sink.Addr+`", "from": "courier@example.com", "to": ["ops@example.com"]},
  "contract": {"dedup": "none", "retry": {"max_attempts": 3, "attempt_timeout": "10s", "deadline": "1m"}}}}}`), 0o600))
	runID := newLab(t).RunID
	tc, err := lab.StartTemporal(ctx, lab.TemporalOptions{Address: srv.HostPort, Namespace: "smtp-" + runID, Logger: testLogger})
	require.NoError(t, err)
	defer tc.Close()
	w, err := lab.StartWorker(ctx, lab.WorkerOptions{Courier: courier, Destinations: cfgPath, Temporal: tc})
	require.NoError(t, err)
	defer func() { _, _ = w.Stop(30 * time.Second) }()
	viaServer := &Real{Starter: starter.New(tc.Client()), Temporal: tc.Client()}
	input := func(id string) workflows.DeliveryInput {
		return workflows.DeliveryInput{
			Operation: opkey.Operation{Tenant: "acme", Destination: "mail", Operation: "notify-shipped", BusinessID: id},
			Payload:   json.RawMessage(`{"subject": "Order ` + id + ` shipped"}`),
		}
	}

	id := "real-" + runID
	out, err := viaServer.Deliver(ctx, input(id), nil)
	require.NoError(t, err)
	require.Equal(t, workflows.StatusCreated, out.Result.Status, out.Result.Error)
	require.Equal(t, messageID(id), out.Result.Receipt.ResourceID)
	require.Equal(t, 1, sink.Count(messageID(id)))

	lost := "real-lost-" + runID
	sink.Inject(lab.MailDropAfterData)
	parked := 0
	out, err = viaServer.Deliver(ctx, input(lost), func(st workflows.DeliveryStatus) *workflows.ReviewDecision {
		parked++
		require.Equal(t, contract.ClassUnknown, st.Attempts[len(st.Attempts)-1].Class)
		require.Equal(t, 1, sink.Count(messageID(lost)), "one mail when the delivery parks")
		return &workflows.ReviewDecision{Decision: workflows.DecisionDelivered, Reviewer: "ops",
			Note: "found it in the mailbox", ResourceID: messageID(lost)}
	})
	require.NoError(t, err)
	require.Equal(t, 1, parked)
	require.Equal(t, workflows.StatusDeliveredByReview, out.Result.Status, out.Result.Error)
	require.Equal(t, messageID(lost), out.Result.Receipt.ResourceID)
	require.Len(t, out.Result.Attempts, 1, "never sent again")
	require.Equal(t, 1, sink.Count(messageID(lost)))
}
