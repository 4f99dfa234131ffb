package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/abde64c9/courier/activities"
	"github.com/abde64c9/courier/opkey"
	"github.com/abde64c9/courier/starter"
	"github.com/abde64c9/courier/workflows"
)

// authenticated finds the caller's tenant from its client certificate or
// its bearer token, and holds the tenant to its rate limit, before h.
func (s *Server) authenticated(h func(http.ResponseWriter, *http.Request, string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(challenge, detail string) {
			w.Header().Set("WWW-Authenticate", challenge)
			writeProblem(w, problem{Type: typeUnauthorized, Status: http.StatusUnauthorized, Detail: detail})
		}
		// A certificate counts only once the server's client CA verified it.
		certTenant, byCert := "", false
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			certTenant, byCert = s.certs.tenant(r.TLS.PeerCertificates[0].Raw)
		}
		header := strings.TrimSpace(r.Header.Get("Authorization"))
		scheme, token, _ := strings.Cut(header, " ")
		token = strings.TrimSpace(token)
		var tenant string
		switch {
		case header == "" && byCert:
			tenant = certTenant
		case !strings.EqualFold(scheme, "Bearer") || token == "":
			refuse(`Bearer realm="courier"`, "send Authorization: Bearer <token>, the token your Courier operator gave you")
			return
		default:
			var ok bool
			if tenant, ok = s.creds.tenant([]byte(token)); !ok {
				refuse(`Bearer realm="courier", error="invalid_token"`, "the bearer token is not one this server knows; ask your Courier operator for yours")
				return
			}
			if byCert && certTenant != tenant {
				refuse(`Bearer realm="courier", error="invalid_token"`, "the client certificate and the bearer token speak for two tenants; send one credential")
				return
			}
		}
		res := s.limits[tenant].Reserve()
		if d := res.Delay(); d > 0 {
			res.Cancel()
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
			writeProblem(w, problem{Type: typeRateLimited, Status: http.StatusTooManyRequests,
				Detail: "this tenant's rate limit is spent; repeat after Retry-After seconds"})
			return
		}
		h(w, r, tenant)
	})
}

// tenantHeaders are headers a caller might try to name a tenant with.
var tenantHeaders = []string{"Tenant", "X-Tenant", "Courier-Tenant", "X-Courier-Tenant"}

// namesTenant says where r tries to choose a tenant, empty if nowhere.
func namesTenant(r *http.Request, body []byte) string {
	for _, h := range tenantHeaders {
		if _, ok := r.Header[h]; ok {
			return "the header " + h
		}
	}
	if r.URL.Query().Has("tenant") {
		return "the query parameter tenant"
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) == nil {
		if _, ok := top["tenant"]; ok {
			return `the body's member "tenant"`
		}
	}
	return ""
}

// Result is what a POST answers, and a repeat of it answers again: the
// same body however often it is asked and by however many at once.
type Result struct {
	Key         string `json:"key"`
	Fingerprint string `json:"fingerprint"`
	Destination string `json:"destination"`
	Operation   string `json:"operation"`
	BusinessID  string `json:"business_id"`
	// State: delivered; awaiting_review (parked for a person's decision);
	// pending (not settled within the wait).
	State   string              `json:"state"`
	Receipt *activities.Receipt `json:"receipt,omitempty"`
	// Evidence is why a parked delivery awaits review.
	Evidence string `json:"evidence,omitempty"`
}

// statusCallerGone is what the metrics count for a request whose caller
// left before its answer (the code proxies log for it); nobody receives it.
const statusCallerGone = 499

// API states beyond Courier's own.
const (
	stateDelivered = "delivered"
	statePending   = "pending"
)

// deliver starts or joins the delivery of (tenant, destination, operation,
// Idempotency-Key) with the body as payload, through starter.Deliver.
func (s *Server) deliver(w http.ResponseWriter, r *http.Request, tenant string) {
	id, err := ParseIdempotencyKey(r.Header.Values("Idempotency-Key"))
	if err != nil {
		writeProblem(w, problem{Type: typeKey, Status: http.StatusBadRequest, Detail: err.Error()})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, opkey.MaxPayloadBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeProblem(w, problem{Type: typeTooLarge, Status: http.StatusRequestEntityTooLarge,
			Detail: "the payload is over the limit of " + strconv.Itoa(opkey.MaxPayloadBytes) + " bytes; send less"})
		return
	case err != nil:
		writeProblem(w, problem{Type: typeInvalid, Status: http.StatusBadRequest, Detail: "reading the body: " + err.Error()})
		return
	}
	if where := namesTenant(r, body); where != "" {
		writeProblem(w, problem{Type: typeTenant, Status: http.StatusBadRequest,
			Detail: where + " names a tenant; the tenant is your token's: leave it out"})
		return
	}
	in := workflows.DeliveryInput{Operation: opkey.Operation{Tenant: tenant, Destination: r.PathValue("destination"),
		Operation: r.PathValue("operation"), BusinessID: id}, Payload: body}
	fp, err := opkey.Fingerprint(body)
	if err == nil {
		err = in.Validate()
	}
	if err != nil {
		writeProblem(w, problem{Type: typeInvalid, Status: http.StatusBadRequest, Detail: err.Error()})
		return
	}
	if d := s.o.Destinations; d != nil {
		if _, ok := d.Destinations[in.Destination]; !ok {
			writeProblem(w, problem{Type: typeNotFound, Status: http.StatusNotFound,
				Detail: "no destination named " + strconv.Quote(in.Destination) + "; GET " + PathDestinations + " lists them"})
			return
		}
	}
	res := Result{Key: opkey.Key(in.Operation), Fingerprint: fp, Destination: in.Destination,
		Operation: in.Operation.Operation, BusinessID: id}
	if err := s.temporalUp(r.Context()); err != nil {
		s.temporalDown(w, err)
		return
	}
	wait := s.o.Wait
	if n, ok := preferWait(r.Header.Values("Prefer")); ok && n < wait {
		wait = n
		w.Header().Set("Preference-Applied", "wait="+strconv.Itoa(int(n/time.Second)))
	}
	ctx, cancel := context.WithTimeout(r.Context(), wait)
	defer cancel()
	defer context.AfterFunc(s.stopping, cancel)()
	st, err := s.o.Starter.Deliver(ctx, in)
	s.answer(w, r, res, st, err, ctx.Err() != nil)
}

// answer maps starter.Deliver's answer to the HTTP answer.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, res Result, st workflows.DeliveryStatus, err error, stopped bool) {
	var invalid *starter.InvalidRequestError
	var conflict *starter.ConflictError
	switch {
	case errors.As(err, &conflict):
		writeProblem(w, problem{Type: typeConflict, Status: http.StatusUnprocessableEntity, Key: res.Key,
			ExistingFingerprint: conflict.ExistingFingerprint, RequestFingerprint: conflict.RequestFingerprint,
			Detail: "this Idempotency-Key was first used with another payload (fingerprint " + conflict.ExistingFingerprint +
				"); send that payload again, or use a new key for a new operation"})
	case errors.As(err, &invalid):
		writeProblem(w, problem{Type: typeInvalid, Status: http.StatusBadRequest, Key: res.Key, Detail: invalid.Err.Error()})
	case err != nil && r.Context().Err() != nil:
		// Nobody to answer; what was started goes on, and a repeat joins it.
		s.o.Logger.Info("api: the caller went away before the answer", "key", res.Key)
		w.WriteHeader(statusCallerGone)
	case err != nil && stopped:
		s.unsettled(w, r, res)
	case err != nil:
		s.temporalDown(w, err)
	case st.State == workflows.StateAwaitingReview:
		res.State = string(workflows.StateAwaitingReview)
		if st.Review != nil {
			res.Evidence = st.Review.Evidence
		}
		accepted(w, res)
	case st.Status == workflows.StatusDuplicate:
		res.State, res.Receipt = stateDelivered, st.Receipt
		w.Header().Set("Idempotent-Replayed", "true")
		writeJSON(w, http.StatusOK, res)
	case st.Status.Delivered():
		res.State, res.Receipt = stateDelivered, st.Receipt
		writeJSON(w, http.StatusCreated, res)
	case st.Status == workflows.StatusConflict:
		writeProblem(w, problem{Type: typeConflict, Status: http.StatusUnprocessableEntity, Key: res.Key,
			ExistingFingerprint: st.Fingerprint, RequestFingerprint: res.Fingerprint, Detail: st.Error})
	default:
		// Rejected, out of attempts, abandoned by a reviewer, or stopped
		// from outside: not delivered. A repeat runs it again only where
		// Courier proves nothing applied (the starter's rule).
		writeProblem(w, problem{Type: typeNotDelivered, Status: http.StatusBadGateway, Key: res.Key,
			State: string(st.State), Detail: st.Error})
	}
}

// unsettled answers a delivery that did not settle within the wait: 202
// where Temporal holds it (its repeat joins it), else 503, since the start
// may not have been made (the repeat starts or joins it then).
func (s *Server) unsettled(w http.ResponseWriter, r *http.Request, res Result) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), answerTimeout)
	defer cancel()
	_, err := s.o.Temporal.DescribeWorkflowExecution(ctx, workflows.WorkflowID(res.Key), "")
	if err != nil {
		s.temporalDown(w, err)
		return
	}
	res.State = statePending
	accepted(w, res)
}

func accepted(w http.ResponseWriter, res Result) {
	w.Header().Set("Location", "/v1/deliveries/"+res.Key)
	writeJSON(w, http.StatusAccepted, res)
}

// temporalDown answers an error from Temporal: 503 with Retry-After when it
// cannot be reached (or has nothing yet), 500 for anything else; the cause
// goes to the log only.
func (s *Server) temporalDown(w http.ResponseWriter, err error) {
	var internal *serviceerror.Internal
	if errors.As(err, &internal) {
		s.o.Logger.Error("api: Temporal failed", "error", err)
		writeProblem(w, problem{Type: typeInternal, Status: http.StatusInternalServerError,
			Detail: "the request failed inside Courier; repeat it: a repeat joins anything already started"})
		return
	}
	s.o.Logger.Warn("api: Temporal unavailable", "error", err)
	w.Header().Set("Retry-After", strconv.Itoa(unavailableRetry))
	writeProblem(w, unavailable())
}

// preferWait reads RFC 7240's wait preference (Prefer: wait=N, seconds).
func preferWait(values []string) (time.Duration, bool) {
	for _, v := range values {
		for _, pref := range strings.Split(v, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(strings.SplitN(pref, ";", 2)[0]), "=")
			if !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			n, err := strconv.Atoi(strings.Trim(strings.TrimSpace(val), `"`))
			if err != nil || n < 0 {
				return 0, false
			}
			// At least a second: the start itself must be made.
			return time.Duration(max(n, 1)) * time.Second, true
		}
	}
	return 0, false
}

// Status is what GET /v1/deliveries/{key} answers.
type Status struct {
	Result
	// Status is Courier's own final status (created, delivered_by_review,
	// rejected, ...), empty while it runs; State is then where it is.
	Status   workflows.Status    `json:"status,omitempty"`
	Attempts []workflows.Attempt `json:"attempts"`
	Error    string              `json:"error,omitempty"`
}

// delivery answers a delivery's status, only to its own tenant: another
// tenant's key reads as unknown, so keys cannot be probed.
func (s *Server) delivery(w http.ResponseWriter, r *http.Request, tenant string) {
	key, err := starter.ParseKey(r.PathValue("key"))
	if err != nil {
		writeProblem(w, problem{Type: typeInvalid, Status: http.StatusBadRequest, Detail: err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), answerTimeout)
	defer cancel()
	st, err := s.o.Starter.Status(ctx, key)
	switch {
	case errors.Is(err, starter.ErrUnknownKey) || err == nil && st.Operation.Tenant != tenant:
		writeProblem(w, problem{Type: typeNotFound, Status: http.StatusNotFound,
			Detail: "no delivery of yours has the key " + key})
		return
	case err != nil:
		s.temporalDown(w, err)
		return
	}
	out := Status{Result: Result{Key: st.Key, Fingerprint: st.Fingerprint, Destination: st.Operation.Destination,
		Operation: st.Operation.Operation, BusinessID: st.Operation.BusinessID, State: string(st.State), Receipt: st.Receipt},
		Status: st.Status, Attempts: st.Attempts, Error: st.Error}
	if st.Status.Delivered() {
		out.State = stateDelivered
	}
	if st.Review != nil && st.State == workflows.StateAwaitingReview {
		out.Evidence = st.Review.Evidence
	}
	writeJSON(w, http.StatusOK, out)
}

// destinations answers each destination's gate (paused, breaker, waiting
// deliveries), as `courier destination status` shows it.
func (s *Server) destinations(w http.ResponseWriter, r *http.Request, _ string) {
	ctx, cancel := context.WithTimeout(r.Context(), answerTimeout)
	defer cancel()
	desk, err := s.o.Starter.Desk(ctx, s.o.Destinations)
	if err != nil {
		s.temporalDown(w, err)
		return
	}
	writeJSON(w, http.StatusOK, desk)
}
