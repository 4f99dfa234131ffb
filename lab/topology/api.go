package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/abde64c9/courier/deploy"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/starter/httpapi"
)

// The HTTP API's files in the state folder: the token of tenant
// lab.NexusTenant (made once, 0600, never printed) and the configuration,
// which holds only its hash.
const (
	apiTokenFile  = "api-" + lab.NexusTenant + ".token"
	apiConfigFile = "api.json"
)

// apiWithin bounds the api phase: a delivery to the sandbox, its repeat.
const apiWithin = time.Minute

func apiURL() string { return fmt.Sprintf("http://127.0.0.1:%d", deploy.APIPort) }

// ensureAPI starts `courier api` on node 1's frontend with the api role's
// token unless it runs, and waits until it is ready (Temporal answers).
// One process: it keeps no state (each request is one Update-with-Start),
// so more only add capacity, behind a load balancer.
func (t *topo) ensureAPI(ctx context.Context, courier, dests string, n deploy.Node) error {
	if t.pid("api") == 0 {
		token, err := deploy.APIToken(filepath.Join(t.dir, apiTokenFile))
		if err != nil {
			return err
		}
		cfg := filepath.Join(t.dir, apiConfigFile)
		if err := deploy.WriteAPIConfig(cfg, lab.NexusTenant, token); err != nil {
			return err
		}
		role, err := lab.ReadToken(t.issuerDir(), deploy.APIRole)
		if err != nil {
			return err
		}
		if err := awaitFreePort(deploy.APIPort); err != nil {
			return fmt.Errorf("api: port %d is taken by another process (the topology uses 23000-23499 on 127.0.0.1): %w", deploy.APIPort, err)
		}
		argv := append([]string{courier}, deploy.APIArgs(cfg, fmt.Sprintf("127.0.0.1:%d", deploy.APIPort), dests)...)
		env := append(append(cleanEnv(), "TEMPORAL_ADDRESS="+n.FrontendAddr(), "TEMPORAL_NAMESPACE=default"), lab.ClientEnv(role)...)
		if _, err := t.spawn("api", argv, env); err != nil {
			return err
		}
	}
	return t.awaitHTTP(ctx, "api", apiURL()+httpapi.PathReady)
}

// apiPhase: over HTTP to the topology's `courier api`, tenant acme's token
// delivers to the sandbox's helpdesk once; the repeat is replayed, byte for
// byte, without a second effect; another token is refused; the delivery's
// status is read back.
func (t *topo) apiPhase(ctx context.Context) row {
	r := row{phase: "api (courier api over HTTP)", deliveries: "0", kills: "-", takeover: "-", duplicates: "-", lost: "-"}
	ctx, cancel := context.WithTimeout(ctx, apiWithin)
	defer cancel()
	failed := 0
	check := func(what string, err error) bool {
		if err != nil {
			failed++
			r.notes = append(r.notes, fmt.Sprintf("api: FAIL %s: %v", what, err))
			return false
		}
		r.notes = append(r.notes, "api: "+what)
		return true
	}
	token, err := lab.ReadToken(t.dir, "api-"+lab.NexusTenant)
	if !check("tenant "+lab.NexusTenant+"'s token from "+filepath.Join(stateDir, apiTokenFile), err) {
		return r
	}
	bizID := fmt.Sprintf("topology-api-%d", time.Now().UnixNano())
	path := "/v1/destinations/" + lab.DestHelpdesk + "/operations/create-ticket"
	body := `{"subject": "through the front door"}`

	first, err := apiCall(ctx, http.MethodPost, path, token, bizID, body)
	if err == nil {
		err = first.want(http.StatusCreated, "")
	}
	if !check("POST with a new Idempotency-Key: 201 Created", err) {
		return r
	}
	r.deliveries = "1"
	var res struct {
		Key   string `json:"key"`
		State string `json:"state"`
	}
	if err := json.Unmarshal(first.body, &res); err != nil || res.Key == "" {
		check("the 201's body names the delivery's key", fmt.Errorf("%v: %s", err, first.body))
		return r
	}
	again, err := apiCall(ctx, http.MethodPost, path, token, bizID, body)
	if err == nil {
		err = again.want(http.StatusOK, "true")
	}
	if err == nil && !bytes.Equal(again.body, first.body) {
		err = fmt.Errorf("the body differs from the first answer's:\n%s\n%s", again.body, first.body)
	}
	check("the repeat: 200 with Idempotent-Replayed: true and the same body", err)
	effects, err := t.sandboxEffects(ctx, res.Key)
	if err == nil && effects != 1 {
		err = fmt.Errorf("the sandbox's helpdesk holds %d tickets with key %s", effects, res.Key)
	}
	if check("the partner (sandbox helpdesk) holds one ticket for the key after both", err) {
		r.duplicates, r.lost = "0", "0"
	} else {
		r.duplicates, r.lost = fmt.Sprint(max(effects-1, 0)), fmt.Sprint(max(1-effects, 0))
	}
	wrong, err := apiCall(ctx, http.MethodPost, path, httpapi.NewToken(), bizID+"-wrong", body)
	if err == nil {
		err = wrong.want(http.StatusUnauthorized, "")
	}
	check("a token the configuration does not know: 401", err)
	got, err := apiCall(ctx, http.MethodGet, "/v1/deliveries/"+url.PathEscape(res.Key), token, "", "")
	if err == nil {
		err = got.want(http.StatusOK, "")
	}
	var status struct {
		State  string `json:"state"`
		Status string `json:"status"`
	}
	if err == nil {
		if err = json.Unmarshal(got.body, &status); err == nil && status.State != "delivered" {
			err = fmt.Errorf("state %q, want delivered: %s", status.State, got.body)
		}
	}
	check("GET /v1/deliveries/{key}: 200, delivered", err)
	r.pass = failed == 0
	return r
}

// answer is an HTTP answer of the API.
type answer struct {
	code     int
	replayed string
	body     []byte
}

// want is nil when the answer has that status and Idempotent-Replayed.
func (a answer) want(code int, replayed string) error {
	if a.code != code || a.replayed != replayed {
		return fmt.Errorf("answered %d (Idempotent-Replayed %q), want %d (%q): %s", a.code, a.replayed, code, replayed, a.body)
	}
	return nil
}

// apiCall calls the topology's API with a bearer token and, for a POST, an
// Idempotency-Key.
func apiCall(ctx context.Context, method, path, token, key, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, apiURL()+path, bytes.NewBufferString(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w (is `courier api` running? see %s)", method, path, err, filepath.Join(stateDir, "api.log"))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{code: resp.StatusCode, replayed: resp.Header.Get("Idempotent-Replayed"), body: b}, err
}

// sandboxEffects counts the sandbox helpdesk's tickets created with key.
func (t *topo) sandboxEffects(ctx context.Context, key string) (int, error) {
	u := fmt.Sprintf("http://127.0.0.1:%d/admin/records?destination=%s", deploy.SandboxPort, lab.DestHelpdesk)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var recs []struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
		return 0, fmt.Errorf("sandbox records: %w", err)
	}
	n := 0
	for _, rec := range recs {
		if rec.Key == key {
			n++
		}
	}
	return n, nil
}
