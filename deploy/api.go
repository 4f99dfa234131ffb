package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/abde64c9/courier/starter/httpapi"
)

// The HTTP API (`courier api`, Courier's front door), as the native
// topology and compose both run it.
const (
	// APIRole is the issuer role whose token the API holds: write on
	// Courier's namespace, as the workers', since it starts deliveries.
	APIRole = "api"
	// ComposeAPIPort is compose's API, in its container and on the host.
	ComposeAPIPort = 8088
)

// APIArgs are `courier api`'s arguments (after the program) in both: its
// configuration file (one tenant's token hash), its address and the
// workers' destinations file (other destinations are refused before
// anything starts), as the host or the container names them.
func APIArgs(config, addr, destinations string) []string {
	return []string{"api", "--config", config, "--addr", addr, "--destinations", destinations, "--log-format", "json"}
}

// APIConfig is the HTTP API's configuration in compose, the native
// topology and the dev stack: one caller, tenant, by its token's hash
// (never the token), at the default rate limit.
func APIConfig(tenant, token string) httpapi.Config {
	return httpapi.Config{Callers: []httpapi.Caller{{Tenant: tenant, TokenSHA256: httpapi.HashToken(token)}}}
}

// WriteAPIConfig writes APIConfig to path, as `courier api --config` reads it.
func WriteAPIConfig(path, tenant, token string) error {
	b, _ := json.MarshalIndent(APIConfig(tenant, token), "", "  ")
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("api config: %w", err)
	}
	return nil
}

// APIToken is the HTTP API token kept at path, made on first use (0600)
// and kept, so a caller's copy stays valid across restarts.
func APIToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(b)) != "" {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("api token: %w", err)
	}
	token := httpapi.NewToken()
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	return token, nil
}
