package destinations

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/contract"
)

// dialectFile is a one-destination file with extra fields for the http
// destination and for its contract.
func dialectFile(fields, contractFields string) string {
	return fmt.Sprintf(`{
  "destinations": {
    "partner": {
      "adapter": "http",
      "url": "http://127.0.0.1:8081/partner/things/{business_id}",
      %s
      "contract": {
        "dedup": "key",%s
        "retry": {"max_attempts": 3, "attempt_timeout": "5s", "deadline": "1m"}
      }
    }
  }
}`, fields, contractFields)
}

func TestDialectDefaultsAreTodays(t *testing.T) {
	// The repository's own files load unchanged, with no dialect fields.
	for _, f := range []string{"lab/config/destinations.dev.json", "deploy/config/destinations.compose.json"} {
		cfg, err := Load(filepath.Join("..", filepath.FromSlash(f)))
		require.NoError(t, err, f)
		for name, d := range cfg.Destinations {
			require.Empty(t, d.Method, name)
			require.Nil(t, d.Rules, name)
			require.Nil(t, d.Receipt, name)
			require.Empty(t, d.Contract.KeyField, name)
		}
	}
	// A contract recorded before these fields existed decodes to the same
	// contract, and one without them encodes as before.
	old := `{"dedup":"key","key_header":"Idempotency-Key","replay_marker":{"header":"Idempotent-Replayed","value":"true"},"retry":{"max_attempts":3,"attempt_timeout":"5s","deadline":"1m0s"}}`
	var c contract.Contract
	require.NoError(t, json.Unmarshal([]byte(old), &c))
	b, err := json.Marshal(c)
	require.NoError(t, err)
	require.JSONEq(t, old, string(b))
}

func TestDialectGood(t *testing.T) {
	cfg, err := Parse([]byte(dialectFile(`
      "method": "PUT",
      "headers": {"Stripe-Version": "2024-06-20"},
      "body": {"under": "/data"},
      "receipt": {"id": "/payment/id", "status": "/payment/status"},
      "tls": {"ca_file": "ca.pem", "server_name": "partner.example"},
      "rules": [
        {"status": 400, "body": {"pointer": "/error/type", "value": "idempotency_error"}, "class": "conflict"},
        {"status": "500-599", "header": {"name": "Should-Retry", "values": ["false", "no"]}, "class": "unknown_outcome"},
        {"status": 500, "header": {"name": "X-Nothing-Applied", "value": "true"}, "class": "rejected", "nothing_applied": true}
      ],`, `
        "key_field": "/idempotency_key", "key_max_length": 45,`)))
	require.NoError(t, err)
	d := cfg.Destinations["partner"]
	require.Equal(t, StatusRange{500, 599}, d.Rules[1].Status)
	require.Equal(t, "/idempotency_key", d.Contract.KeyField)
}

// TestLookupReadingGood: a list lookup's reading and a replay's own
// receipt load as written, and write back as they were read.
func TestLookupReadingGood(t *testing.T) {
	cfg, err := Parse([]byte(dialectFile(`
      "lookup_url": "http://127.0.0.1:8081/partner/things?external_id={key}",
      "lookup": {"items": "/things", "count": "/count", "match": {"pointer": "/external_id", "equals": "{key}"},
                 "receipt": {"id": ["/id", "/uuid"], "status": "/state"}, "not_found": [404, 410]},
      "receipt": {"id": "/data/id"},
      "rules": [{"status": 409, "body": {"pointer": "/error/code", "value": "duplicate"}, "class": "replayed",
                 "receipt": {"id": "/error/links/original"}}],`, `
        "dedup": "lookup",`)))
	require.NoError(t, err)
	d := cfg.Destinations["partner"]
	require.Equal(t, Pointers{"/id", "/uuid"}, d.Lookup.Receipt.ID)
	require.Equal(t, Pointers{"/data/id"}, d.Receipt.ID)
	require.Equal(t, Pointers{"/error/links/original"}, d.Rules[0].Receipt.ID)
	require.True(t, d.Lookup.NotFoundStatus(410))
	require.False(t, d.Lookup.NotFoundStatus(400))
	require.Empty(t, cfg.Warnings(), "the lookup's reading is declared")
	b, err := json.Marshal(d)
	require.NoError(t, err)
	require.Contains(t, string(b), `"receipt":{"id":"/data/id"}`)
	require.Contains(t, string(b), `"id":["/id","/uuid"]`)

	// Without a reading the worker says what a 2xx must hold.
	d.Lookup = nil
	cfg.Destinations["partner"] = d
	require.Len(t, cfg.Warnings(), 1)
	require.Contains(t, cfg.Warnings()[0], "declare lookup.items and lookup.match")
	var none *LookupReading
	require.True(t, none.NotFoundStatus(404), "404 is not found by default")
}

func TestKeyInBodyOnly(t *testing.T) {
	cfg, err := Parse([]byte(dialectFile("", `
        "key_field": "/idempotency_key",`)))
	require.NoError(t, err)
	require.Empty(t, cfg.Destinations["partner"].Contract.KeyHeader, "the key goes in the body only")
}

// TestDialectBad: each mistake is refused at load, naming the field (and,
// for a rule, its own line) and how to fix it.
func TestDialectBad(t *testing.T) {
	for _, tc := range []struct{ name, fields, contract, want string }{
		{"unknown placeholder", `"lookup_url": "http://h/x?id={order_id}",`, "", `lookup_url: unknown placeholder {order_id}; use {key}, {business_id}, {tenant}, {operation}`},
		{"placeholder in host", `"lookup_url": "http://{tenant}.h/x",`, "", "lookup_url: placeholders go in the path or query, not the host"},
		{"method", `"method": "DELETE",`, "", `method: "DELETE"; use POST, PUT or PATCH`},
		{"key too short for Courier", "", `"key_max_length": 32,`, "contract.key_max_length: the destination takes keys of at most 32 characters, but Courier's keys are 36"},
		{"key pointer syntax", "", `"key_field": "idempotency_key",`, `contract.key_field: "idempotency_key" is not a JSON pointer: it must start with /`},
		{"key over the payload", `"body": {"under": "/data/event"},`, `"key_field": "/data",`, "contract.key_field: /data would replace the payload placed at body.under /data/event"},
		{"receipt both", `"receipt": {"id": "/id", "id_from_location": true},`, "", "receipt: set id or id_from_location, not both"},
		{"tls half a pair", `"tls": {"cert_file": "c.pem"},`, "", "tls: cert_file and key_file go together"},
		{"static key header", `"headers": {"idempotency-key": "x"},`, "", "headers.idempotency-key: is the key header"},
		{"webhook auth with header", `"auth": {"kind": "standard-webhooks", "header": "X", "secret_env": "S"},`, "", "auth: standard-webhooks sets its own headers"},
		{"unknown class", `"rules": [{"status": 400, "class": "fine"}],`, "", `rules[0] (line 6): class "fine": use one of conflict`},
		{"bad status", `"rules": [{"status": "599-500", "class": "rejected"}],`, "", "rules[0] (line 6): status 599-500: use a code from 100 to 599"},
		{"applied made nothing applied", `"rules": [
        {"status": "500-599", "class": "rejected"}
      ],`, "", "rules[0] (line 7): class rejected means nothing was applied, but status 500-502, 504-599 may have applied the effect"},
		{"range cannot say nothing applied", `"rules": [
        {"status": "500-502", "class": "throttled", "nothing_applied": true}
      ],`, "", `write a rule for that one status with "nothing_applied": true`},
		{"2xx as in flight", `"rules": [{"status": 202, "class": "in_flight"}],`, "", "class in_flight means nothing was applied, but status 202 may have applied the effect"},
		{"needless nothing_applied", `"rules": [{"status": 400, "class": "rejected", "nothing_applied": true}],`, "", "nothing_applied: not needed"},
		{"nothing_applied with applied class", `"rules": [{"status": 500, "class": "server_error", "nothing_applied": true}],`, "", "nothing_applied: contradicts class server_error"},
		{"unreachable", `"rules": [
        {"status": "400-499", "class": "rejected"},
        {"status": 422, "body": {"pointer": "/code", "value": "x"}, "class": "rejected"}
      ],`, "", "rules[1] (line 8): unreachable: rules[0] (line 7) matches every answer this rule matches"},
		{"contradictory", `"rules": [
        {"status": 422, "body": {"pointer": "/code", "value": "reused"}, "class": "conflict"},

        {"status": 422, "body": {"pointer": "/code", "value": "reused"}, "class": "in_flight"}
      ],`, "", "rules[1] (line 9): contradicts rules[0] (line 7), which matches every answer this rule matches and names conflict, not in_flight"},
		{"marker never applies", `"rules": [{"status": "200-299", "class": "created"}],`, `
        "replay_marker": {"status": 200},`, "rules[0] (line 6): reads every 200 as created, so contract.replay_marker (status 200) never applies"},
		{"lookup without dedup lookup", `"lookup_url": "http://h/x?q={key}", "lookup": {"items": "/tickets"},`, "", "lookup: reads the answer of lookup_url, for dedup lookup"},
		{"lookup match of another value", `"lookup_url": "http://h/x?q={key}", "lookup": {"items": "/t", "match": {"pointer": "/ref", "equals": "{tenant}"}},`, `
        "dedup": "lookup",`, `lookup.match.equals: "{tenant}"; use "{key}" or "{business_id}"`},
		{"lookup match without pointer", `"lookup_url": "http://h/x?q={key}", "lookup": {"match": {"equals": "{key}"}},`, `
        "dedup": "lookup",`, "lookup.match.pointer: needs the record's field that holds the key"},
		{"lookup items not a pointer", `"lookup_url": "http://h/x?q={key}", "lookup": {"items": "tickets"},`, `
        "dedup": "lookup",`, `lookup.items: "tickets" is not a JSON pointer`},
		{"lookup success as not found", `"lookup_url": "http://h/x?q={key}", "lookup": {"not_found": [200]},`, `
        "dedup": "lookup",`, "lookup.not_found: status 200 is a success: an answer that finds nothing says so in its body"},
		{"lookup id from location", `"lookup_url": "http://h/x?q={key}", "lookup": {"receipt": {"id_from_location": true}},`, `
        "dedup": "lookup",`, "lookup.receipt.id_from_location: a lookup's record names its id in the answer"},
		{"receipt id list with a bad pointer", `"receipt": {"id": ["/data/id", "id"]},`, "", `receipt.id: "id" is not a JSON pointer`},
		{"receipt id the whole answer", `"receipt": {"id": [""]},`, "", "receipt.id: an empty pointer names the whole answer"},
		{"rule receipt on a failure", `"rules": [{"status": 409, "class": "conflict", "receipt": {"id": "/id"}}],`, "",
			"rules[0] (line 6): receipt: only an answer read as created or replayed has a receipt, not conflict"},
		{"rule receipt bad pointer", `"rules": [{"status": 409, "class": "replayed", "receipt": {"id": "error/id"}}],`, "",
			`rules[0] (line 6): receipt.id: "error/id" is not a JSON pointer`},
		{"body match without pointer", `"rules": [{"status": 400, "body": {"value": "x"}, "class": "conflict"}],`, "", `rules[0] (line 6): body: needs a pointer`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(dialectFile(tc.fields, tc.contract)))
			require.Error(t, err)
			require.Contains(t, err.Error(), tc.want)
			require.Contains(t, err.Error(), `destination "partner" (line 3)`)
		})
	}
}

func TestRulesAreNotForSQL(t *testing.T) {
	_, err := Parse([]byte(`{"destinations": {"ledger": {"adapter": "sql", "driver": "sqlite", "dsn": "x.db",
  "rules": [{"status": 400, "class": "conflict"}],
  "contract": {"dedup": "unique-commit", "retry": {"max_attempts": 3, "attempt_timeout": "5s", "deadline": "1m"}}}}}`))
	require.ErrorContains(t, err, "only for adapter http")
}

func TestExpandURL(t *testing.T) {
	v := URLValues{Key: "k/1", BusinessID: "order 7", Tenant: "acme", Operation: "create"}
	u, err := ExpandURL("https://h/{tenant}/things/{business_id}?op={operation}&ref={business_id}", v)
	require.NoError(t, err)
	require.Equal(t, "https://h/acme/things/order%207?op=create&ref=order+7", u)
	_, err = ExpandURL("https://h/x/{key}", v)
	require.ErrorContains(t, err, `placeholder {key}: "k/1" holds a / or \ or decodes to . or ..`, "escaped, a proxy could decode it")
	u, err = ExpandURL("https://h/x?key={key}", v)
	require.NoError(t, err)
	require.Equal(t, "https://h/x?key=k%2F1", u, "in the query a separator is a value")

	_, err = ExpandURL("https://h/{tenant}/x", URLValues{Key: "k"})
	require.ErrorContains(t, err, "placeholder {tenant}: the delivery has no tenant")
	u, err = ExpandURL("https://h/x?tenant={tenant}", URLValues{})
	require.NoError(t, err, "an empty query value names no other resource")
	require.Equal(t, "https://h/x?tenant=", u)
}

// TestExpandURLRefusesDotSegments: a value that makes a path segment . or
// .. would reach another resource; anywhere else dots are plain.
func TestExpandURLRefusesDotSegments(t *testing.T) {
	const tmpl = "https://h/things/{business_id}/notes?ref={business_id}"
	for id, want := range map[string]string{
		".":  `placeholder {business_id}: ".": a path segment of . or .. names another resource; use another value, or put the placeholder in the query`,
		"..": `placeholder {business_id}: "..": a path segment of . or .. names another resource; use another value, or put the placeholder in the query`,
	} {
		_, err := ExpandURL(tmpl, URLValues{BusinessID: id})
		require.EqualError(t, err, want)
		u, err := ExpandURL("https://h/things?ref={business_id}", URLValues{BusinessID: id})
		require.NoError(t, err, "in the query, %q is a value", id)
		require.Equal(t, "https://h/things?ref="+id, u)
	}
	for _, id := range []string{"...", ".hidden", "v1.2", "..x", "%2ex"} {
		u, err := ExpandURL(tmpl, URLValues{BusinessID: id})
		require.NoError(t, err, id)
		require.Equal(t, "https://h/things/"+url.PathEscape(id)+"/notes?ref="+url.QueryEscape(id), u)
	}
	// Whatever a proxy decodes before it resolves the path stays in the
	// segment: no separator, encoded or not, and nothing that decodes to a
	// dot-segment.
	for _, id := range []string{"./", "../x", "../admin", `..\admin`, "%2e%2e", "%252e%252e", "..%2Fadmin", "a%5Cb"} {
		_, err := ExpandURL(tmpl, URLValues{BusinessID: id})
		require.ErrorContains(t, err, `holds a / or \ or decodes to . or ..`, id)
		u, err := ExpandURL("https://h/things?ref={business_id}", URLValues{BusinessID: id})
		require.NoError(t, err, "in the query, %q is a value", id)
		require.Equal(t, "https://h/things?ref="+url.QueryEscape(id), u)
	}

	// A segment the value only completes is refused as well; one it is
	// only part of is not.
	_, err := ExpandURL("https://h/{tenant}{business_id}", URLValues{Tenant: ".", BusinessID: "."})
	require.EqualError(t, err, `path segment {tenant}{business_id}: "..": a path segment of . or .. names another resource; use another value, or put the placeholder in the query`)
	_, err = ExpandURL("https://h/.{business_id}/x", URLValues{BusinessID: "."})
	require.ErrorContains(t, err, `path segment .{business_id}: ".."`)
	u, err := ExpandURL("https://h/things/{business_id}.json", URLValues{BusinessID: "."})
	require.NoError(t, err)
	require.Equal(t, "https://h/things/..json", u)
	u, err = ExpandURL("https://h/things/../{business_id}", URLValues{BusinessID: "b"})
	require.NoError(t, err, "the template's own segments are its author's")
	require.Equal(t, "https://h/things/../b", u)
}

func TestPointer(t *testing.T) {
	var doc any
	require.NoError(t, json.Unmarshal([]byte(`{"payment":{"id":"p-1"},"a/b":{"~":1},"errors":[{"code":"X"}]}`), &doc))
	for p, want := range map[Pointer]any{"/payment/id": "p-1", "/a~1b/~0": 1.0, "/errors/0/code": "X"} {
		v, ok := p.Lookup(doc)
		require.True(t, ok, p)
		require.Equal(t, want, v, p)
	}
	for _, p := range []Pointer{"/payment/nope", "/errors/1/code", "/errors/01/code", "/payment/id/deeper"} {
		_, ok := p.Lookup(doc)
		require.False(t, ok, p)
	}
	_, err := Pointer("/bad~2").Tokens()
	require.Error(t, err)
}

// TestExampleFilesLoad: every file of examples/destinations loads.
func TestExampleFilesLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "examples", "destinations", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		_, err := Load(f)
		require.NoError(t, err, f)
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		require.False(t, strings.Contains(string(b), "whsec_"), "%s: a secret never goes in the file", f)
	}
}

// TestTenants: a destination may name the tenants that may use it; an
// empty list or a blank name is refused, saying how to fix it.
func TestTenants(t *testing.T) {
	file := func(tenants string) []byte {
		return []byte(`{"destinations": {"crm": {"adapter": "http", "url": "https://crm.example/tickets", ` + tenants + `
  "contract": {"dedup": "key", "key_header": "Idempotency-Key", "retry": {"max_attempts": 3, "attempt_timeout": "5s", "deadline": "1m"}}}}}`)
	}
	cfg, err := Parse(file(`"tenants": ["acme"],`))
	require.NoError(t, err)
	require.True(t, cfg.Destinations["crm"].Allows("acme"))
	require.False(t, cfg.Destinations["crm"].Allows("globex"))
	cfg, err = Parse(file(""))
	require.NoError(t, err)
	require.True(t, cfg.Destinations["crm"].Allows("globex"), "no tenants named: every tenant")
	_, err = Parse(file(`"tenants": [],`))
	require.ErrorContains(t, err, "tenants: empty")
	_, err = Parse(file(`"tenants": [" acme"],`))
	require.ErrorContains(t, err, `tenants[0]: " acme" is not a tenant's name`)
}
