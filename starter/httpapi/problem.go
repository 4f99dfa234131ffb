package httpapi

import (
	"encoding/json"
	"net/http"
)

// problem is an RFC 9457 problem body, with Courier's extension members.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Key is the delivery's key, where the problem concerns one.
	Key string `json:"key,omitempty"`
	// ExistingFingerprint and RequestFingerprint: a conflict's two payloads.
	ExistingFingerprint string `json:"existing_fingerprint,omitempty"`
	RequestFingerprint  string `json:"request_fingerprint,omitempty"`
	// State is a delivery's final state, where it ended without an effect.
	State string `json:"state,omitempty"`
}

// Problem types: each names the docs' section that explains it.
const (
	typeBase         = "https://github.com/abde64c9/courier/blob/main/docs/api.md#"
	typeInvalid      = typeBase + "invalid-request"
	typeKey          = typeBase + "idempotency-key"
	typeTenant       = typeBase + "tenant"
	typeConflict     = typeBase + "conflict"
	typeNotDelivered = typeBase + "not-delivered"
	typeUnauthorized = typeBase + "unauthorized"
	typeRateLimited  = typeBase + "rate-limited"
	typeTooLarge     = typeBase + "too-large"
	typeUnavailable  = typeBase + "unavailable"
	typeNotFound     = typeBase + "not-found"
	typeMethod       = typeBase + "method-not-allowed"
	typeInternal     = typeBase + "internal"
)

// titles are each type's short summary, the same for every occurrence.
var titles = map[string]string{
	typeInvalid:      "The request is invalid; nothing was sent",
	typeKey:          "The Idempotency-Key header is missing or malformed; nothing was sent",
	typeTenant:       "The tenant is the credential's; a request may not name one",
	typeConflict:     "This Idempotency-Key was used with another payload; nothing was sent",
	typeNotDelivered: "The delivery ended without being delivered",
	typeUnauthorized: "A valid bearer token is required",
	typeRateLimited:  "Too many requests for this tenant",
	typeTooLarge:     "The request body is too large",
	typeUnavailable:  "Temporal cannot be reached; nothing was started",
	typeNotFound:     "Not found",
	typeMethod:       "Method not allowed",
	typeInternal:     "Internal error",
}

func writeProblem(w http.ResponseWriter, p problem) {
	p.Title = titles[p.Type]
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// unavailable answers that Temporal did not answer; the cause stays in the
// server's log, since it names the server's own addresses.
func unavailable() problem {
	return problem{Type: typeUnavailable, Status: http.StatusServiceUnavailable,
		Detail: "Temporal did not answer; repeat the request after Retry-After: a repeat joins anything already started"}
}
