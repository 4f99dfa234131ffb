package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"
)

type receipt struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

func created(id string) receipt { return receipt{ID: id, Status: "created"} }

type apiError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// destination is the request's {dest} and its mode; an unknown one is
// answered 404 here.
func (s *Server) destination(w http.ResponseWriter, r *http.Request) (string, Mode, bool) {
	dest := r.PathValue("dest")
	mode, ok := s.modes[dest]
	if !ok {
		writeJSON(w, http.StatusNotFound, apiError{Error: "unknown_destination"})
	}
	return dest, mode, ok
}

// hangUp closes the connection without writing a byte of response.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): aborting the handler resets the stream,
		// still without a response.
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}

// canonicalTicket checks the body is a JSON object with a non-empty string
// "subject" and returns its compact form with sorted keys and that form's
// SHA-256. Good enough for a sandbox; Courier's own fingerprint is RFC 8785.
func canonicalTicket(body []byte) ([]byte, string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // keep numbers exactly as sent
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, "", false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", false
	}
	if subject, _ := obj["subject"].(string); subject == "" {
		return nil, "", false
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return nil, "", false
	}
	c := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	sum := sha256.Sum256(c)
	return c, hex.EncodeToString(sum[:]), true
}

// maintenancePage is a garbled lookup's answer: a 200 that no JSON reader
// can take for an answer about the key.
const maintenancePage = "<html><body><h1>Scheduled maintenance</h1></body></html>"

// lookupAt serves GET /{dest}{route} for the destinations whose lookup is
// there; any other destination refuses it, since a 404 would wrongly read
// as "no such effect".
func (s *Server) lookupAt(route string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		dest, mode, ok := s.destination(w, r)
		if !ok {
			return
		}
		p := personalities[mode]
		if p.lookupRoute != route {
			writeJSON(w, http.StatusMethodNotAllowed, apiError{Error: "lookup_not_supported"})
			return
		}
		// Like a 503 before validation: the page stands in front of the API.
		if f := s.arriveLookup(dest); f != nil && f.Kind == FaultGarbledLookup {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, maintenancePage)
			return
		}
		a, err := p.lookup(r.Context(), s.store, dest, r.URL.Query())
		if err != nil {
			slog.Error("sandbox: lookup", "destination", dest, "error", err)
			writeJSON(w, http.StatusInternalServerError, apiError{Error: "internal"})
			return
		}
		a.write(w)
	}
}

// faultRequest is the body of POST /admin/faults.
type faultRequest struct {
	Destination string    `json:"destination"`
	Fault       FaultKind `json:"fault"`
	Count       int       `json:"count"`
	Delay       string    `json:"delay"`
}

func (s *Server) handleFaults(w http.ResponseWriter, r *http.Request) {
	var fr faultRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fr); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("fault: %v", err)})
		return
	}
	if !s.known(w, fr.Destination) {
		return
	}
	f := Fault{Kind: fr.Fault, Count: fr.Count}
	if fr.Delay != "" {
		d, err := time.ParseDuration(fr.Delay)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("fault: delay: %v", err)})
			return
		}
		f.Delay = d
	}
	if err := s.Inject(fr.Destination, f); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRecords(w http.ResponseWriter, r *http.Request) {
	dest := r.URL.Query().Get("destination")
	if !s.known(w, dest) {
		return
	}
	recs, err := s.store.records(r.Context(), dest)
	if err != nil {
		slog.Error("sandbox: records", "destination", dest, "error", err)
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "internal"})
		return
	}
	writeJSON(w, http.StatusOK, recs)
}

func (s *Server) handleRequests(w http.ResponseWriter, r *http.Request) {
	dest := r.URL.Query().Get("destination")
	if !s.known(w, dest) {
		return
	}
	writeJSON(w, http.StatusOK, s.Requests(dest))
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	dest := r.URL.Query().Get("destination")
	if !s.known(w, dest) {
		return
	}
	if err := s.Reset(dest); err != nil {
		slog.Error("sandbox: reset", "destination", dest, "error", err)
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "internal"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// known answers 404 for an unknown destination.
func (s *Server) known(w http.ResponseWriter, dest string) bool {
	if _, ok := s.modes[dest]; !ok {
		writeJSON(w, http.StatusNotFound, apiError{Error: "unknown_destination"})
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		slog.Debug("sandbox: write response", "error", err)
	}
}
