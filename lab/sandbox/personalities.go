package sandbox

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Personalities: sandbox services that speak a real vendor's dialect, each
// as that vendor documents it, or a pattern many vendors share (where the
// key goes and how long it may be, how a replay, a key reused with another
// payload and a key in flight are answered, where the receipt is, how the
// key is searched for). Tickets, keys, faults and the request log work as
// for the other modes.
const (
	// ModeStripe: POST /v1/tickets, Idempotency-Key (at most 255
	// characters); 200 for a new object and for a replay, which carries
	// Idempotent-Replayed: true; a key reused with other parameters is 400
	// idempotency_error with Stripe-Should-Retry: false; a key in flight 409.
	ModeStripe Mode = "stripe-like"
	// ModeStripeIgnoresKeys looks like ModeStripe but ignores the key: every
	// request creates an object.
	ModeStripeIgnoresKeys Mode = "stripe-like-ignores-keys"
	// ModeAdyen: POST /v71/payments, Idempotency-Key (at most 64); a replay
	// is the first response with the Idempotency-Key header echoed; errors
	// are 422 with an errorCode.
	ModeAdyen Mode = "adyen-like"
	// ModePayPal: POST /v2/checkout/orders, PayPal-Request-Id (at most
	// 108); 201 for a new order, 200 with its latest state for a repeat.
	ModePayPal Mode = "paypal-like"
	// ModeSquare: POST /v2/payments with idempotency_key in the body (at
	// most 45); the resource nested at /payment; a replay is the first
	// response, unmarked; a key reused is 400 IDEMPOTENCY_KEY_REUSED.
	ModeSquare Mode = "square-like"
	// ModeWebhook: a receiver of Standard Webhooks at POST /webhooks: it
	// checks webhook-signature under WebhookSecret, deduplicates on
	// webhook-id, and takes the event's data member as the ticket.
	ModeWebhook Mode = "signed-webhook"
	// ModePutByID: PUT /things/{business_id} creates the thing (201) or, with
	// the same content, changes nothing (200); the resource is named only
	// in the Location header; other content is 409.
	ModePutByID Mode = "put-by-business-id"
	// ModeSearch: a helpdesk without idempotency that keeps an external id.
	// POST /api/tickets with external_id in the body always creates a
	// ticket (201, the ticket nested at /ticket);
	// GET /api/tickets?external_id=K lists the tickets that carry K, an
	// empty list when none (never 404); without that parameter it lists
	// every ticket, as list endpoints do with a filter they do not know.
	ModeSearch Mode = "search-lookup"
	// ModeReplayError: POST /v1/entries, Idempotency-Key; 201 for a new
	// entry; the repeat of a completed request is an error, 409
	// duplicate_request, which names the original at
	// /error/errors/0/links/conflicting_resource_id under an error id of
	// its own; a key reused with another payload is 422
	// idempotency_key_reused; a key in flight 409 request_in_progress.
	ModeReplayError Mode = "replay-as-error"
)

// WebhookSecret is the secret the ModeWebhook receiver verifies with
// (Standard Webhooks form: whsec_ and the key in base64).
const WebhookSecret = "whsec_c2FuZGJveC13ZWJob29rLXNpZ25pbmcta2V5LTAx"

// webhookTolerance is how far webhook-timestamp may be from the
// receiver's clock, against replayed captures.
const webhookTolerance = 5 * time.Minute

// DialectModes is one destination per personality, named for the example
// destinations files.
func DialectModes() map[string]Mode {
	return map[string]Mode{
		"stripe":          ModeStripe,
		"stripe-ignoring": ModeStripeIgnoresKeys,
		"adyen":           ModeAdyen,
		"paypal":          ModePayPal,
		"square":          ModeSquare,
		"webhooks":        ModeWebhook,
		"things":          ModePutByID,
		"search":          ModeSearch,
		"entries":         ModeReplayError,
	}
}

// DevModes is DefaultModes and DialectModes together: what `courier
// sandbox` serves.
func DevModes() map[string]Mode {
	m := DefaultModes()
	for k, v := range DialectModes() {
		m[k] = v
	}
	return m
}

// answer is one HTTP response a personality gives.
type answer struct {
	status int
	header map[string]string
	body   any // nil: no body
}

func (a answer) write(w http.ResponseWriter) {
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	if a.body == nil {
		w.WriteHeader(a.status)
		return
	}
	writeJSON(w, a.status, a.body)
}

// personality is one dialect, as the sandbox serves it: a vendor's, or the
// ticket service's own (POST /tickets) for the first four modes.
type personality struct {
	method, route string // route is the path after /{dest}; PUT: its prefix
	// parse finds the key and the ticket in a request (the body's
	// payload), or answers it (a missing or bad key, a bad signature).
	parse  func(r *http.Request, body []byte, p *personality) (key string, ticket []byte, refuse *answer)
	maxKey int
	// dedup: a repeated key replays the first receipt; keepsKey: the key
	// is stored with the ticket (for lookups) even without dedup.
	dedup, keepsKey bool
	invalid         answer
	tooLong         answer
	created         func(r *http.Request, id, key string) answer
	replay          func(r *http.Request, id, key string) answer
	reused          answer
	inFlight        answer
	// lookupRoute is the GET route (after /{dest}) that finds tickets by
	// their stored key, served by lookup; "" for none.
	lookupRoute string
	lookup      lookupFunc
}

// lookupFunc answers a lookup with the query q from the destination's
// stored tickets.
type lookupFunc func(ctx context.Context, st *store, dest string, q url.Values) (answer, error)

// lookupRoutes lists the personalities' lookup routes, each once.
func lookupRoutes() []string {
	var routes []string
	for _, p := range personalities {
		if p.lookupRoute != "" && !slices.Contains(routes, p.lookupRoute) {
			routes = append(routes, p.lookupRoute)
		}
	}
	slices.Sort(routes)
	return routes
}

var personalities = map[Mode]*personality{
	ModeHonoursKeys:       tickets(true, true),
	ModeIgnoresKeys:       tickets(false, false),
	ModeNoKeys:            tickets(false, false),
	ModeLookup:            searchable(tickets(false, true), "/tickets", lookupByKey),
	ModeStripe:            stripe(true),
	ModeStripeIgnoresKeys: stripe(false),
	ModeAdyen: {
		method: http.MethodPost, route: "/v71/payments", parse: keyInHeader("Idempotency-Key"), maxKey: 64, dedup: true, keepsKey: true,
		invalid: answer{status: 422, body: adyenError("validation", "101", "Invalid field: subject")},
		tooLong: answer{status: 422, body: adyenError("validation", "702", "Idempotency-Key is longer than 64 characters")},
		created: func(_ *http.Request, id, _ string) answer {
			return answer{status: 200, body: map[string]any{"pspReference": id, "resultCode": "Authorised"}}
		},
		replay: func(_ *http.Request, id, key string) answer {
			return answer{status: 200, header: map[string]string{"Idempotency-Key": key},
				body: map[string]any{"pspReference": id, "resultCode": "Authorised"}}
		},
		reused:   answer{status: 422, body: adyenError("idempotency", "different_request", "Idempotency-Key was used with another request")},
		inFlight: answer{status: 422, body: adyenError("idempotency", "704", "request already processed or in progress")},
	},
	ModePayPal: {
		method: http.MethodPost, route: "/v2/checkout/orders", parse: keyInHeader("PayPal-Request-Id"), maxKey: 108, dedup: true, keepsKey: true,
		invalid: answer{status: 422, body: paypalError("UNPROCESSABLE_ENTITY", "MISSING_REQUIRED_PARAMETER")},
		tooLong: answer{status: 400, body: paypalError("INVALID_REQUEST", "INVALID_PARAMETER_VALUE")},
		created: func(_ *http.Request, id, _ string) answer {
			return answer{status: 201, body: map[string]any{"id": id, "status": "CREATED"}}
		},
		replay: func(_ *http.Request, id, _ string) answer {
			return answer{status: 200, body: map[string]any{"id": id, "status": "CREATED"}}
		},
		reused:   answer{status: 422, body: paypalError("UNPROCESSABLE_ENTITY", "DUPLICATE_REQUEST_ID")},
		inFlight: answer{status: 409, body: paypalError("RESOURCE_CONFLICT", "PREVIOUS_REQUEST_IN_PROGRESS")},
	},
	ModeSquare: {
		method: http.MethodPost, route: "/v2/payments", parse: squareKey, maxKey: 45, dedup: true, keepsKey: true,
		invalid: answer{status: 400, body: squareError("INVALID_REQUEST_ERROR", "MISSING_REQUIRED_PARAMETER", "subject")},
		tooLong: answer{status: 400, body: squareError("INVALID_REQUEST_ERROR", "VALUE_TOO_LONG", "idempotency_key")},
		created: func(_ *http.Request, id, _ string) answer {
			return answer{status: 200, body: map[string]any{"payment": map[string]any{"id": id, "status": "COMPLETED"}}}
		},
		replay: func(_ *http.Request, id, _ string) answer {
			return answer{status: 200, body: map[string]any{"payment": map[string]any{"id": id, "status": "COMPLETED"}}}
		},
		reused:   answer{status: 400, body: squareError("INVALID_REQUEST_ERROR", "IDEMPOTENCY_KEY_REUSED", "idempotency_key")},
		inFlight: answer{status: 409, body: squareError("INVALID_REQUEST_ERROR", "CONFLICT", "idempotency_key")},
	},
	ModeWebhook: {
		method: http.MethodPost, route: "/webhooks", parse: signedWebhook, dedup: true, keepsKey: true,
		invalid: answer{status: 400, body: apiError{Error: "validation", Field: "data.subject"}},
		created: func(_ *http.Request, id, _ string) answer {
			return answer{status: 200, body: map[string]any{"id": id, "status": "received"}}
		},
		replay: func(_ *http.Request, id, _ string) answer {
			return answer{status: 200, body: map[string]any{"id": id, "status": "duplicate"}}
		},
		reused:   answer{status: 409, body: apiError{Error: "webhook_id_reused"}},
		inFlight: answer{status: 409, body: apiError{Error: "in_progress"}},
	},
	ModePutByID: {
		method: http.MethodPut, route: "/things/", parse: keyInPath, dedup: true, keepsKey: true,
		invalid: answer{status: 400, body: apiError{Error: "validation", Field: "subject"}},
		created: func(r *http.Request, _, _ string) answer {
			return answer{status: 201, header: map[string]string{"Location": r.URL.Path}}
		},
		replay: func(r *http.Request, _, _ string) answer {
			return answer{status: 200, header: map[string]string{"Location": r.URL.Path}}
		},
		reused:   answer{status: 409, body: apiError{Error: "exists_with_different_content"}},
		inFlight: answer{status: 409, body: apiError{Error: "in_progress"}},
	},
	ModeSearch: searchable(&personality{
		method: http.MethodPost, route: "/api/tickets", parse: externalID, keepsKey: true,
		invalid: answer{status: http.StatusUnprocessableEntity, body: apiError{Error: "validation", Field: "subject"}},
		created: func(_ *http.Request, id, key string) answer {
			return answer{status: http.StatusCreated, body: map[string]any{"ticket": searchTicket(id, key)}}
		},
	}, "/api/tickets", searchByExternalID),
	ModeReplayError: {
		method: http.MethodPost, route: "/v1/entries", parse: keyInHeader("Idempotency-Key"), dedup: true, keepsKey: true,
		invalid: answer{status: 400, body: entriesError("validation", map[string]any{"field": "subject"})},
		created: func(_ *http.Request, id, _ string) answer {
			return answer{status: 201, body: map[string]any{"data": map[string]any{"id": id, "status": "posted"}}}
		},
		replay: func(_ *http.Request, id, _ string) answer {
			// Each error answer has an id of its own, so only the link to
			// the original says which entry the repeat is about.
			return answer{status: 409, body: entriesError("duplicate_request", map[string]any{
				"id": "err_" + randomHex(8),
				"errors": []any{map[string]any{
					"code": "duplicate", "links": map[string]any{"conflicting_resource_id": id},
				}},
			})}
		},
		reused: answer{status: 422, body: entriesError("idempotency_key_reused", map[string]any{
			"message": "Idempotency-Key was already used with another request body"})},
		inFlight: answer{status: 409, body: entriesError("request_in_progress", nil)},
	},
}

// searchable gives p a lookup at route.
func searchable(p *personality, route string, fn lookupFunc) *personality {
	p.lookupRoute, p.lookup = route, fn
	return p
}

// lookupByKey is the ticket service's own lookup, GET /tickets?key=K: the
// first ticket stored with K, or 404.
func lookupByKey(ctx context.Context, st *store, dest string, q url.Values) (answer, error) {
	key := q.Get("key")
	if key == "" {
		return answer{status: http.StatusBadRequest, body: apiError{Error: "validation", Field: "key"}}, nil
	}
	id, err := st.findByKey(ctx, dest, key)
	if err != nil {
		return answer{}, err
	}
	if id == "" {
		return answer{status: http.StatusNotFound, body: apiError{Error: "not_found"}}, nil
	}
	return answer{status: http.StatusOK, body: created(id)}, nil
}

// maxSearch bounds a search answer's list, as a list endpoint's page does.
const maxSearch = 100

// searchByExternalID is ModeSearch's GET /api/tickets: the tickets whose
// external_id is the parameter's value, or every ticket when the request
// has no external_id parameter (other parameters are ignored).
func searchByExternalID(ctx context.Context, st *store, dest string, q url.Values) (answer, error) {
	var key *string
	if q.Has("external_id") {
		k := q.Get("external_id")
		key = &k
	}
	found, err := st.search(ctx, dest, key, maxSearch)
	if err != nil {
		return answer{}, err
	}
	list := make([]any, len(found))
	for i, t := range found {
		list[i] = searchTicket(t.id, t.key)
	}
	return answer{status: http.StatusOK, body: map[string]any{"tickets": list, "count": len(list)}}, nil
}

func searchTicket(id, externalID string) map[string]any {
	return map[string]any{"id": id, "external_id": externalID, "status": "open"}
}

// externalID takes external_id out of the body; the rest is the ticket.
func externalID(_ *http.Request, body []byte, p *personality) (string, []byte, *answer) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil || obj == nil {
		return "", nil, &p.invalid
	}
	var key string
	if json.Unmarshal(obj["external_id"], &key) != nil || key == "" {
		return "", nil, &answer{status: http.StatusUnprocessableEntity, body: apiError{Error: "validation", Field: "external_id"}}
	}
	delete(obj, "external_id")
	ticket, _ := json.Marshal(obj)
	return key, ticket, nil
}

func entriesError(code string, fields map[string]any) any {
	e := map[string]any{"code": code}
	for k, v := range fields {
		e[k] = v
	}
	return map[string]any{"error": e}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// tickets is the ticket service's own dialect.
func tickets(dedup, keepsKey bool) *personality {
	return &personality{
		method: http.MethodPost, route: "/tickets", parse: keyInHeader(KeyHeader), dedup: dedup, keepsKey: keepsKey,
		invalid: answer{status: http.StatusUnprocessableEntity, body: apiError{Error: "validation", Field: "subject"}},
		created: func(_ *http.Request, id, _ string) answer {
			return answer{status: http.StatusCreated, body: created(id)}
		},
		replay: func(_ *http.Request, id, _ string) answer {
			return answer{status: http.StatusOK, header: map[string]string{ReplayedHeader: "true"}, body: created(id)}
		},
		reused:   answer{status: http.StatusUnprocessableEntity, body: apiError{Error: "idempotency_key_reused"}},
		inFlight: answer{status: http.StatusConflict, body: apiError{Error: "idempotency_key_in_flight"}},
	}
}

func stripe(honoursKeys bool) *personality {
	obj := func(id string) map[string]any {
		return map[string]any{"id": id, "object": "ticket", "status": "created"}
	}
	return &personality{
		method: http.MethodPost, route: "/v1/tickets", parse: keyInHeader("Idempotency-Key"), maxKey: 255, dedup: honoursKeys, keepsKey: honoursKeys,
		invalid: answer{status: 400, body: stripeError("invalid_request_error", "parameter_missing", "Missing required param: subject.")},
		tooLong: answer{status: 400, body: stripeError("invalid_request_error", "", "Idempotency-Key is longer than 255 characters.")},
		created: func(_ *http.Request, id, _ string) answer { return answer{status: 200, body: obj(id)} },
		replay: func(_ *http.Request, id, _ string) answer {
			return answer{status: 200, header: map[string]string{ReplayedHeader: "true"}, body: obj(id)}
		},
		reused: answer{status: 400, header: map[string]string{"Stripe-Should-Retry": "false"},
			body: stripeError("idempotency_error", "", "Keys for idempotent requests can only be used with the same parameters they were first used with.")},
		inFlight: answer{status: 409, header: map[string]string{"Stripe-Should-Retry": "true"},
			body: stripeError("idempotency_error", "idempotency_key_in_use", "There is currently another in-progress request using this idempotency key.")},
	}
}

func stripeError(typ, code, msg string) any {
	e := map[string]any{"type": typ, "message": msg}
	if code != "" {
		e["code"] = code
	}
	return map[string]any{"error": e}
}

func adyenError(typ, code, msg string) any {
	return map[string]any{"status": 422, "errorType": typ, "errorCode": code, "message": msg}
}

func paypalError(name, issue string) any {
	return map[string]any{"name": name, "details": []any{map[string]any{"issue": issue}}}
}

func squareError(category, code, field string) any {
	return map[string]any{"errors": []any{map[string]any{"category": category, "code": code, "field": field}}}
}

func keyInHeader(name string) func(*http.Request, []byte, *personality) (string, []byte, *answer) {
	return func(r *http.Request, body []byte, _ *personality) (string, []byte, *answer) {
		return r.Header.Get(name), body, nil
	}
}

// squareKey takes idempotency_key out of the body; the rest is the ticket.
func squareKey(_ *http.Request, body []byte, p *personality) (string, []byte, *answer) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return "", nil, &p.invalid
	}
	var key string
	if json.Unmarshal(obj["idempotency_key"], &key) != nil || key == "" {
		return "", nil, &answer{status: 400, body: squareError("INVALID_REQUEST_ERROR", "MISSING_REQUIRED_PARAMETER", "idempotency_key")}
	}
	delete(obj, "idempotency_key")
	ticket, _ := json.Marshal(obj)
	return key, ticket, nil
}

// keyInPath: the business id in the path is the key.
func keyInPath(r *http.Request, body []byte, p *personality) (string, []byte, *answer) {
	id := strings.TrimPrefix(r.PathValue("rest"), strings.TrimPrefix(p.route, "/"))
	if id == "" || strings.Contains(id, "/") {
		return "", nil, &answer{status: 404, body: apiError{Error: "not_found"}}
	}
	return id, body, nil
}

// signedWebhook checks a Standard Webhooks signature and takes the key
// from webhook-id and the ticket from the event's data.
func signedWebhook(r *http.Request, body []byte, p *personality) (string, []byte, *answer) {
	if err := VerifyWebhook(r.Header, body, time.Now()); err != nil {
		return "", nil, &answer{status: 401, body: apiError{Error: "invalid_signature: " + err.Error()}}
	}
	var event struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal(body, &event) != nil || len(event.Data) == 0 {
		return "", nil, &p.invalid
	}
	return r.Header.Get("webhook-id"), event.Data, nil
}

// VerifyWebhook checks a Standard Webhooks signature under WebhookSecret,
// as a receiver does: a fresh timestamp and a v1 signature that matches.
func VerifyWebhook(h http.Header, body []byte, now time.Time) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("webhook-id, webhook-timestamp and webhook-signature are required")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errors.New("webhook-timestamp is not a Unix time")
	}
	if d := now.Sub(time.Unix(sec, 0)); d > webhookTolerance || d < -webhookTolerance {
		return errors.New("webhook-timestamp is too far from now")
	}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(WebhookSecret, "whsec_"))
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s.", id, ts)
	m.Write(body)
	want := m.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, sig, ok := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(sig)
		if ok && v == "v1" && err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no v1 signature matches")
}

// handleCreate serves a destination's create route in its dialect. The
// order of checks is the order a real provider would run them:
// availability, validation, the key's state, then the write.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	dest, mode, ok := s.destination(w, r)
	if !ok {
		return
	}
	p := personalities[mode]
	path := "/" + r.PathValue("rest")
	if r.Method != p.method || !strings.HasPrefix(path, p.route) || (!strings.HasSuffix(p.route, "/") && path != p.route) {
		writeJSON(w, http.StatusNotFound, apiError{Error: "not_found"})
		return
	}
	n, fault := s.arrive(dest)
	entry := RequestLog{Request: n}
	done := func(res Result, write, cacheHit bool) {
		entry.Result, entry.Write, entry.CacheHit = res, write, cacheHit
		s.record(dest, entry)
	}
	faultIs := func(k FaultKind) bool { return fault != nil && fault.Kind == k }

	// Read the whole body before any hang-up, so closing the connection sends
	// a clean FIN rather than a reset over unread bytes.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		done(ResultValidationRejected, false, false)
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: "too_large"})
		}
		return // otherwise the client is gone
	}
	key, raw, refuse := p.parse(r, body, p)
	if key != "" {
		entry.Key = &key
	}
	if faultIs(FaultEcho400) || faultIs(FaultEcho500) {
		done(ResultValidationRejected, false, false)
		status := http.StatusBadRequest
		if faultIs(FaultEcho500) {
			status = http.StatusInternalServerError
		}
		writeJSON(w, status, map[string]any{"error": "echo", "echo": echo(r, body)})
		return
	}
	if faultIs(FaultFail503) {
		done(ResultUnavailable, false, false)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(fault.Delay/time.Second))))
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "unavailable"})
		return
	}
	if refuse != nil {
		done(ResultValidationRejected, false, false)
		refuse.write(w)
		return
	}
	payload, hash, ok := canonicalTicket(raw)
	if !ok {
		done(ResultValidationRejected, false, false)
		p.invalid.write(w)
		return
	}
	if p.maxKey > 0 && len(key) > p.maxKey {
		done(ResultValidationRejected, false, false)
		p.tooLong.write(w)
		return
	}

	dedup := p.dedup && key != ""
	release := func() {}
	if dedup {
		if !s.claim(dest, key) {
			done(ResultInFlight, false, false)
			p.inFlight.write(w)
			return
		}
		release = sync.OnceFunc(func() { s.release(dest, key) })
		defer release()
	}
	if faultIs(FaultDelayBeforeCommit) {
		done(ResultDelayedThenClosed, false, false)
		s.sleep(r.Context(), fault.Delay)
		release() // before the hang-up, which the client may answer with a retry
		hangUp(w)
		return
	}
	storedKey, ticketID := "", ""
	if p.keepsKey {
		storedKey = key
	}
	if p.method == http.MethodPut {
		ticketID = key // the resource is named by its path
	}
	// Once the request is read it is applied, as by a real server: a client
	// that gives up mid-transaction must not roll the effect back.
	id, prior, err := s.store.create(context.WithoutCancel(r.Context()), dest, storedKey, dedup, payload, hash, ticketID)
	release() // committed: a repeat now gets the replay, not in flight
	if err != nil {
		slog.Error("sandbox: create", "destination", dest, "error", err)
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "internal"})
		return
	}
	if prior != nil {
		if prior.hash != hash {
			done(ResultKeyReused, false, false)
			p.reused.write(w)
			return
		}
		done(ResultCachedReceipt, false, true)
		p.replay(r, prior.ticketID, key).write(w)
		return
	}
	switch {
	case faultIs(FaultCloseAfterCommit):
		done(ResultWrittenThenClosed, true, false)
		hangUp(w)
	case faultIs(FaultDelayAfterCommit):
		done(ResultWrittenThenDelayed, true, false)
		s.sleep(r.Context(), fault.Delay)
		p.created(r, id, key).write(w)
	case faultIs(FaultEchoCreated):
		done(ResultWrittenThenReceipt, true, false)
		withEcho(p.created(r, id, key), echo(r, body)).write(w)
	default:
		done(ResultWrittenThenReceipt, true, false)
		p.created(r, id, key).write(w)
	}
}

// echo is what a request carried, as an echoing server shows it: each
// header as sent, in base64 and URL-encoded, and the body.
func echo(r *http.Request, body []byte) map[string]any {
	sent, b64, escaped := map[string]string{}, map[string]string{}, map[string]string{}
	for name := range r.Header {
		v := r.Header.Get(name)
		sent[name], b64[name], escaped[name] = v, base64.StdEncoding.EncodeToString([]byte(v)), url.QueryEscape(v)
	}
	return map[string]any{"headers": sent, "headers_base64": b64, "headers_escaped": escaped, "body": string(body)}
}

// withEcho adds the echo to an answer's JSON object body.
func withEcho(a answer, e map[string]any) answer {
	var obj map[string]any
	if b, err := json.Marshal(a.body); err == nil && json.Unmarshal(b, &obj) == nil && obj != nil {
		obj["echo"] = e
		a.body = obj
	}
	return a
}
