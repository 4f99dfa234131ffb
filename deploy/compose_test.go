package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/abde64c9/courier/activities/ledger/sqlstore"
	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab"
	"github.com/abde64c9/courier/lab/devserver"
	"github.com/abde64c9/courier/starter/httpapi"
	"github.com/abde64c9/courier/workflows"
)

// No Docker engine runs where these tests do, so the compose file and the
// Dockerfile are checked by construction: every name, path, port, command
// and flag they use must refer to something real in this repository.

const repoRoot = ".."

// composeDir is the compose file's folder (this one), named from the
// repository root so that its paths compare with the repository's.
// Compose resolves bind-mount sources from it; images build from the root.
var composeDir = filepath.Join(repoRoot, "deploy")

// The build every image comes from, as the compose file names it: the
// repository root as the context (the Dockerfile copies the whole module),
// with this folder's Dockerfile.
const (
	buildContext    = ".."
	buildDockerfile = "deploy/Dockerfile"
)

type composeFile struct {
	Name     string             `yaml:"name"`
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image           string                `yaml:"image"`
	User            string                `yaml:"user"`
	Build           *build                `yaml:"build"`
	Command         stringList            `yaml:"command"`
	Entrypoint      stringList            `yaml:"entrypoint"`
	Environment     map[string]string     `yaml:"environment"`
	Ports           []string              `yaml:"ports"`
	Expose          []string              `yaml:"expose"`
	Volumes         []string              `yaml:"volumes"`
	DependsOn       map[string]dependency `yaml:"depends_on"`
	Healthcheck     *healthcheck          `yaml:"healthcheck"`
	Restart         string                `yaml:"restart"`
	StopGracePeriod string                `yaml:"stop_grace_period"`
}

type build struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
	Target     string `yaml:"target"`
}

type dependency struct {
	Condition string `yaml:"condition"`
}

type healthcheck struct {
	Test        []string `yaml:"test"`
	Interval    string   `yaml:"interval"`
	Timeout     string   `yaml:"timeout"`
	Retries     int      `yaml:"retries"`
	StartPeriod string   `yaml:"start_period"`
}

// stringList is a compose command or entrypoint: a list, or one string.
type stringList []string

func (s *stringList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = []string{n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*s = l
	return nil
}

// loadCompose reads the compose file strictly: a key this test does not
// know is an error, so nothing in the file goes unchecked.
func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(composeDir, "docker-compose.yml"))
	require.NoError(t, err)
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var c composeFile
	require.NoError(t, dec.Decode(&c), "docker-compose.yml")
	return c
}

func TestComposeFileRefersToRealThings(t *testing.T) {
	c := loadCompose(t)
	require.Empty(t, checkCompose(c, courierFlags(t)))
}

func TestDockerfileBuildsCourier(t *testing.T) {
	require.Empty(t, checkDockerfile(filepath.Join(composeDir, "Dockerfile")))
}

// inService is a mistake made to the service name of the file.
func inService(name string, mistake func(s *service)) func(c *composeFile) {
	return func(c *composeFile) {
		s := c.Services[name]
		mistake(&s)
		c.Services[name] = s
	}
}

// The checks must be able to fail: each mistake below, made on the real
// file, is caught and named.
func TestComposeCheckCatchesMistakes(t *testing.T) {
	flags := courierFlags(t)
	for _, tc := range []struct {
		name   string
		break_ func(c *composeFile)
		want   string
	}{
		{"renamed server service", func(c *composeFile) {
			c.Services["temporal-server"] = c.Services["temporal"]
			delete(c.Services, "temporal")
		}, `depends on "temporal", which is not a service`},
		{"address of a service that does not exist", func(c *composeFile) {
			c.Services["worker"].Environment["TEMPORAL_ADDRESS"] = "temporal-frontend:7233"
		}, `TEMPORAL_ADDRESS "temporal-frontend:7233": no service "temporal-frontend"`},
		{"server port not exposed", func(c *composeFile) {
			c.Services["worker"].Environment["TEMPORAL_ADDRESS"] = "temporal:7234"
		}, "port 7234 is not one the service exposes"},
		{"misspelt subcommand", func(c *composeFile) {
			c.Services["worker"].Command[0] = "wroker"
		}, `courier wroker`},
		{"sandbox from the product image", inService("sandbox", func(s *service) {
			b := *s.Build
			b.Target = "product"
			s.Build = &b
		}), "`courier sandbox` is not a courier subcommand"},
		{"unknown build target", inService("worker", func(s *service) {
			b := *s.Build
			b.Target = "debug"
			s.Build = &b
		}), `build target "debug"`},
		{"flag that does not exist", inService("worker", func(s *service) {
			s.Command = append(slices.Clone(s.Command), "--concurrency", "4")
		}), "--concurrency"},
		{"built from the compose folder", inService("worker", func(s *service) {
			b := *s.Build
			b.Context = "."
			s.Build = &b
		}), `worker: build must be the repository root with deploy's Dockerfile (context .., dockerfile deploy/Dockerfile), not context "."`},
		{"Dockerfile at the root", inService("sandbox", func(s *service) {
			b := *s.Build
			b.Dockerfile = "Dockerfile"
			s.Build = &b
		}), `sandbox: build must be the repository root with deploy's Dockerfile`},
		{"mount source named from the repository root", inService("temporal", func(s *service) {
			s.Volumes = slices.Clone(s.Volumes)
			s.Volumes[1] = "./deploy/dynamicconfig:/etc/temporal/config/dynamicconfig:ro"
		}), "temporal mounts ./deploy/dynamicconfig, which is not in deploy/"},
		{"destinations file from the repository root", inService("worker", func(s *service) {
			s.Volumes = slices.Clone(s.Volumes)
			s.Volumes[0] = "./deploy/config:/config:ro"
		}), "mounted from ../deploy/deploy/config/destinations.compose.json, which does not exist"},
		{"destinations file not mounted", inService("worker", func(s *service) { s.Volumes = nil }), "/config/destinations.compose.json is not in a bind mount"},
		{"secret missing from the environment", func(c *composeFile) {
			delete(c.Services["worker"].Environment, "HELPDESK_TOKEN")
		}, "HELPDESK_TOKEN"},
		{"no outcome ledger", func(c *composeFile) {
			delete(c.Services["worker"].Environment, "COURIER_LEDGER")
		}, "COURIER_LEDGER is not set"},
		{"a ledger per replica", func(c *composeFile) {
			c.Services["worker"].Environment["COURIER_LEDGER"] = "sqlite:/data/outcomes.db"
		}, "must be PostgreSQL"},
		{"colliding host ports", inService("sandbox", func(s *service) { s.Ports = []string{"127.0.0.1:8080:8081"} }), "host port 8080"},
		{"port on every interface", inService("sandbox", func(s *service) { s.Ports = []string{"8081:8081"} }), "published on loopback only"},
		{"port on another interface", inService("temporal", func(s *service) { s.Ports = []string{"0.0.0.0:7233:7233"} }), "published on loopback only"},
		{"search attribute missing", inService("temporal-setup", func(s *service) {
			s.Command = stringList{strings.Replace(s.Command[0], "--name CourierState --type Keyword", "", 1)}
		}), "CourierState"},
		{"healthy dependency without healthcheck", inService("sandbox", func(s *service) { s.Healthcheck = nil }), `waits for "sandbox" to be healthy, which has no healthcheck`},
		{"unpinned image", inService("temporal-ui", func(s *service) { s.Image = "temporalio/ui:latest" }), "temporalio/ui:latest"},
		{"worker with the reader's token", func(c *composeFile) {
			c.Services["worker"].Environment["TEMPORAL_CONFIG_FILE"] = "/issuer/reader.toml"
		}, "does not read /issuer/worker.toml"},
		{"key set from another service", func(c *composeFile) {
			c.Services["temporal"].Environment["TEMPORAL_JWT_KEY_SOURCE1"] = "http://sandbox:8081/.well-known/jwks.json"
		}, "temporal uses sandbox but does not wait"},
		{"issuer's tokens in its container only", inService("issuer", func(s *service) { s.Volumes = nil }), "--dir /data is not a volume"},
		{"no HTTP API", func(c *composeFile) { delete(c.Services, "courier-api") }, "no service runs `courier api`"},
		{"api with the worker's token", func(c *composeFile) {
			c.Services["courier-api"].Environment["TEMPORAL_CONFIG_FILE"] = "/issuer/worker.toml"
		}, "does not read /issuer/api.toml"},
		{"api on another port", inService("courier-api", func(s *service) { s.Ports = []string{"127.0.0.1:8089:8088"} }), "deploy.ComposeAPIPort"},
		{"api without the destinations file", inService("courier-api", func(s *service) {
			s.Command = slices.Clone(s.Command)
			s.Command = slices.Delete(s.Command, 5, 7)
		}), "deploy.APIArgs"},
		{"api configured with another file", inService("courier-api", func(s *service) {
			s.Command = slices.Clone(s.Command)
			s.Command[2] = "/config/destinations.compose.json"
		}), "unknown field"},
		{"api in another namespace", func(c *composeFile) {
			c.Services["courier-api"].Environment["TEMPORAL_NAMESPACE"] = "orders"
		}, "no worker runs"},
		{"setup before the issuer", inService("temporal-setup", func(s *service) {
			s.DependsOn = maps.Clone(s.DependsOn)
			delete(s.DependsOn, "issuer")
		}), "temporal-setup reads a token but does not wait for the issuer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadCompose(t)
			tc.break_(&c)
			problems := checkCompose(c, flags)
			require.NotEmpty(t, problems)
			require.Contains(t, strings.Join(problems, "\n"), tc.want)
		})
	}
}

func TestDockerfileCheckCatchesMistakes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(composeDir, "Dockerfile"))
	require.NoError(t, err)
	for name, tc := range map[string]struct{ old, new, want string }{
		"another package":    {"./cmd/courier", "./cmd/other", "./cmd/courier"},
		"lab in the product": {"FROM runtime AS product\n", "FROM lab AS product\n", "the product image carries the lab"},
		"no lab target":      {"AS lab\n", "AS tools\n", "no stage named lab"},
		"runs as root":       {"USER 10001", "USER root", "non-root"},
		"old Go":             {"golang:1.26", "golang:1.22", "go.mod"},
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "Dockerfile")
			require.NoError(t, os.WriteFile(f, bytes.ReplaceAll(b, []byte(tc.old), []byte(tc.new)), 0o644))
			require.Contains(t, strings.Join(checkDockerfile(f), "\n"), tc.want)
		})
	}
}

// checkCompose lists everything in c that does not refer to something real.
func checkCompose(c composeFile, flags programFlags) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range c.Services {
			if !yield(n) {
				return
			}
		}
	})

	hostPorts := map[string]string{}
	for _, name := range names {
		s := c.Services[name]
		for dep, d := range s.DependsOn {
			target, ok := c.Services[dep]
			switch {
			case !ok:
				bad("%s depends on %q, which is not a service", name, dep)
				continue
			case d.Condition == "service_healthy" && target.Healthcheck == nil:
				bad("%s waits for %q to be healthy, which has no healthcheck", name, dep)
			case !slices.Contains([]string{"service_started", "service_healthy", "service_completed_successfully"}, d.Condition):
				bad("%s depends on %q with condition %q", name, dep, d.Condition)
			}
		}
		if s.Image == "" && s.Build == nil {
			bad("%s has neither image nor build", name)
		}
		if s.Build == nil {
			if _, tag, ok := strings.Cut(s.Image, ":"); !ok || tag == "latest" {
				bad("%s: image %q must be pinned to a version", name, s.Image)
			}
		}
		for _, p := range s.Ports {
			// Published on loopback only: reaching a service from another
			// host is a decision, made by editing this file.
			parts := strings.Split(p, ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				bad("%s: port %q must be 127.0.0.1:HOST:CONTAINER (published on loopback only)", name, p)
				continue
			}
			host := parts[1]
			if other, taken := hostPorts[host]; taken {
				bad("%s and %s both publish host port %s", other, name, host)
			}
			hostPorts[host] = name
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(composeDir, src)); err != nil {
					bad("%s mounts %s, which is not in deploy/ (compose resolves it from the compose file's folder)", name, src)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				bad("%s mounts volume %q, which is not declared under volumes", name, src)
			}
		}
		if addr, ok := s.Environment["TEMPORAL_ADDRESS"]; ok {
			problems = append(problems, checkAddress(c, name, "TEMPORAL_ADDRESS "+fmt.Sprintf("%q", addr), addr)...)
		}
		if s.Build != nil {
			problems = append(problems, checkCourierService(c, name, s, flags)...)
		}
		for _, part := range s.Command {
			if strings.Contains(part, "search-attribute create") {
				problems = append(problems, checkSearchAttributes(name, part)...)
			}
		}
	}
	if !slices.ContainsFunc(names, func(n string) bool {
		s := c.Services[n]
		return s.Build != nil && len(s.Command) > 0 && s.Command[0] == "api"
	}) {
		bad("no service runs `courier api`: compose has no HTTP front door, which the native topology runs")
	}
	problems = append(problems, checkVersions(c)...)
	problems = append(problems, checkCallers(c)...)
	return problems
}

// tokenUsers are the services that read a token from the issuer's volume,
// the role each reads and how: the worker its client profile
// (TEMPORAL_CONFIG_FILE), the setup job the admin's token in its script.
var tokenUsers = map[string]string{"worker": "worker.toml", "courier-api": APIRole + ".toml", "temporal-setup": "admin.token"}

// checkCallers: the issuer runs as the native topology's does (courier-lab
// issuer), keeps its key and tokens in a volume, serves the key set the
// server reads, and each service that calls the server reads its own
// role's token from that volume, once the issuer is healthy.
func checkCallers(c composeFile) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	is, ok := c.Services["issuer"]
	if !ok || len(is.Command) == 0 || is.Command[0] != "issuer" {
		return []string{"no issuer service running `courier-lab issuer`: nothing signs the callers' tokens"}
	}
	vol := volumeAt(is, flagValue(is.Command, "--dir"))
	if vol == "" {
		bad("issuer: --dir %s is not a volume: its key and tokens would not outlive it nor reach the callers", flagValue(is.Command, "--dir"))
	}
	src := c.Services["temporal"].Environment["TEMPORAL_JWT_KEY_SOURCE1"]
	u, err := url.Parse(src)
	switch {
	case err != nil || u.Scheme != "http" || u.Path != JWKSPath:
		bad("temporal: TEMPORAL_JWT_KEY_SOURCE1 %q: want http://issuer:PORT%s", src, JWKSPath)
	default:
		problems = append(problems, checkAddress(c, "temporal", "TEMPORAL_JWT_KEY_SOURCE1 "+src, u.Host)...)
	}
	for _, name := range slices.Sorted(maps.Keys(tokenUsers)) {
		s := c.Services[name]
		if d, ok := s.DependsOn["issuer"]; !ok || d.Condition != "service_healthy" {
			bad("%s reads a token but does not wait for the issuer to be healthy", name)
		}
		at := ""
		for _, v := range s.Volumes {
			if parts := strings.Split(v, ":"); parts[0] == vol && len(parts) > 1 {
				at = parts[1]
			}
		}
		if at == "" {
			bad("%s does not mount the issuer's volume %q", name, vol)
			continue
		}
		want := path.Join(at, tokenUsers[name])
		if !strings.Contains(s.Environment["TEMPORAL_CONFIG_FILE"]+"\n"+strings.Join(s.Command, "\n"), want) {
			bad("%s: does not read %s, its role's token", name, want)
		}
	}
	return problems
}

// volumeAt is the named volume a service mounts at dir, or "".
func volumeAt(s service, dir string) string {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) > 1 && parts[1] == dir && !strings.HasPrefix(parts[0], ".") {
			return parts[0]
		}
	}
	return ""
}

// checkAddress checks a host:port inside the compose network: the host is a
// service and the port one its container exposes.
func checkAddress(c composeFile, user, what, addr string) []string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return []string{fmt.Sprintf("%s: %s: %v", user, what, err)}
	}
	target, ok := c.Services[host]
	if !ok {
		return []string{fmt.Sprintf("%s: %s: no service %q (inside the compose network the host is a service name)", user, what, host)}
	}
	if !slices.Contains(containerPorts(target), port) {
		return []string{fmt.Sprintf("%s: %s: port %s is not one the service exposes (%v)", user, what, port, containerPorts(target))}
	}
	if target.Healthcheck == nil {
		return nil
	}
	if d, ok := c.Services[user].DependsOn[host]; !ok || d.Condition != "service_healthy" {
		return []string{fmt.Sprintf("%s uses %s but does not wait for it to be healthy", user, host)}
	}
	return nil
}

// containerPorts are the ports a service listens on: published or exposed
// ones, and a courier-lab sandbox's --addr.
func containerPorts(s service) []string {
	ports := slices.Clone(s.Expose)
	for _, p := range s.Ports {
		parts := strings.Split(p, ":")
		ports = append(ports, parts[len(parts)-1])
	}
	if len(s.Command) > 0 && (s.Command[0] == "sandbox" || s.Command[0] == "issuer") {
		if a := flagValue(s.Command, "--addr"); a != "" {
			if _, port, err := net.SplitHostPort(a); err == nil {
				ports = append(ports, port)
			}
		}
	}
	return ports
}

// imagePrograms is the program each of the Dockerfile's targets runs.
var imagePrograms = map[string]string{"product": "courier", "lab": "courier-lab"}

// checkCourierService checks a service built from the Dockerfile: a target
// of it, a real subcommand of that target's program with real flags, and
// for the worker, the product image and its destinations file.
func checkCourierService(c composeFile, name string, s service, flags programFlags) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if s.Build.Context != buildContext || s.Build.Dockerfile != buildDockerfile {
		bad("%s: build must be the repository root with deploy's Dockerfile (context %s, dockerfile %s), not context %q, dockerfile %q",
			name, buildContext, buildDockerfile, s.Build.Context, s.Build.Dockerfile)
	}
	program, ok := imagePrograms[s.Build.Target]
	if !ok {
		bad("%s: build target %q: the Dockerfile's targets are product (courier) and lab (courier-lab)", name, s.Build.Target)
		return problems
	}
	if len(s.Command) == 0 {
		bad("%s: no command (a %s subcommand)", name, program)
		return problems
	}
	known, err := flags(program, s.Command[0])
	if err != nil {
		bad("%s: command `%s %s` is not a %s subcommand: %v", name, program, s.Command[0], program, err)
		return problems
	}
	for _, arg := range s.Command[1:] {
		if f, ok := strings.CutPrefix(arg, "--"); ok {
			f, _, _ = strings.Cut(f, "=")
			if !known[f] {
				bad("%s: %s %s has no flag --%s", name, program, s.Command[0], f)
			}
		}
	}
	switch s.Command[0] {
	case "worker":
		problems = append(problems, checkWorker(c, name, s)...)
	case "api":
		problems = append(problems, checkAPI(c, name, s)...)
	case "sandbox", "issuer":
		if a := flagValue(s.Command, "--addr"); !strings.HasPrefix(a, "0.0.0.0:") {
			bad("%s: --addr %q must listen on 0.0.0.0 to be reachable from other containers", name, a)
		}
	}
	return problems
}

func checkWorker(c composeFile, name string, s service) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if l := s.Environment["COURIER_LEDGER"]; l == "" {
		bad("%s: COURIER_LEDGER is not set: the worker keeps no outcome ledger, and a repeat after the namespace's retention is a new delivery", name)
	} else if u, err := url.Parse(l); err != nil || u.Scheme != "postgres" {
		bad("%s: COURIER_LEDGER %q: the replicas share one ledger, so it must be PostgreSQL (postgres://...)", name, l)
	} else if _, ok := s.DependsOn[u.Hostname()]; !ok {
		bad("%s: the outcome ledger is on %s, which the worker does not depend on", name, u.Hostname())
	}
	if _, ok := s.Environment["TEMPORAL_ADDRESS"]; !ok {
		bad("%s: TEMPORAL_ADDRESS is not set: the worker would look for Temporal in its own container", name)
	}
	if m := flagValue(s.Command, "--metrics"); m != "" {
		_, port, _ := net.SplitHostPort(m)
		if !slices.Contains(containerPorts(s), port) {
			bad("%s: metrics port %s is not published", name, port)
		}
	}
	file := flagValue(s.Command, "--destinations")
	local, err := hostPath(s, file)
	if err != nil {
		bad("%s: --destinations %s: %v", name, file, err)
		return problems
	}
	cfg, err := destinations.Load(local)
	if err != nil {
		bad("%s: %v", name, err)
		return problems
	}
	for _, dn := range cfg.Names() {
		d := cfg.Destinations[dn]
		if a := d.Auth; a != nil && a.SecretEnv != "" && s.Environment[a.SecretEnv] == "" {
			bad("%s: destination %q reads its secret from %s, which the service's environment does not set", name, dn, a.SecretEnv)
		}
		if a := d.Auth; a != nil && a.SecretFile != "" {
			if _, err := hostPath(s, a.SecretFile); err != nil {
				bad("%s: destination %q: auth.secret_file %s: %v", name, dn, a.SecretFile, err)
			}
		}
		var hosts []string
		for _, raw := range []string{d.URL, d.LookupURL} {
			if raw == "" {
				continue
			}
			u, err := url.Parse(strings.NewReplacer("{key}", "k", "{business_id}", "b").Replace(raw))
			if err != nil {
				bad("%s: destination %q: %v", name, dn, err)
				continue
			}
			port := u.Port()
			if port == "" {
				port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
			}
			hosts = append(hosts, net.JoinHostPort(u.Hostname(), port))
		}
		if d.Driver == "pgx" {
			u, err := url.Parse(d.DSN)
			if err != nil {
				bad("%s: destination %q: dsn: %v", name, dn, err)
				continue
			}
			hosts = append(hosts, u.Host)
			if _, hasPassword := u.User.Password(); !hasPassword && s.Environment["PGPASSWORD"] == "" {
				bad("%s: destination %q: the dsn has no password and PGPASSWORD is not set", name, dn)
			}
		}
		for _, h := range hosts {
			for _, p := range checkAddress(c, name, fmt.Sprintf("destination %q at %s", dn, h), h) {
				bad("%s", p)
			}
			host, _, _ := net.SplitHostPort(h)
			if _, ok := s.DependsOn[host]; !ok {
				bad("%s: destination %q is served by %s, which the worker does not depend on", name, dn, host)
			}
		}
	}
	return problems
}

// composeAPIToken is compose's dev token for the HTTP API: the compose file
// names it, deploy/config/api.compose.json holds its hash.
const composeAPIToken = "courier_compose_dev_acme"

// checkAPI: compose's `courier api` runs as the native topology's does: the
// same arguments (deploy.APIArgs) with its container's paths and port, the
// worker's destinations file and namespace, and a configuration of the
// topology's shape (deploy.APIConfig: tenant lab.NexusTenant's one token, by
// its hash). Its token (the api role's) is checked with the other callers'.
func checkAPI(c composeFile, name string, s service) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	worker := c.Services["worker"]
	config := flagValue(s.Command, "--config")
	want := APIArgs(config, fmt.Sprintf("0.0.0.0:%d", ComposeAPIPort), flagValue(worker.Command, "--destinations"))
	if !slices.Equal(s.Command, want) {
		bad("%s: command %q: want %q, the native topology's arguments (deploy.APIArgs) with the worker's destinations file", name, s.Command, want)
	}
	if p := fmt.Sprintf("127.0.0.1:%d:%d", ComposeAPIPort, ComposeAPIPort); !slices.Equal(s.Ports, []string{p}) {
		bad("%s: ports %q: want [%s] (deploy.ComposeAPIPort)", name, s.Ports, p)
	}
	if s.Environment["TEMPORAL_NAMESPACE"] != worker.Environment["TEMPORAL_NAMESPACE"] {
		bad("%s: TEMPORAL_NAMESPACE %q is not the worker's %q: the API would start deliveries no worker runs", name, s.Environment["TEMPORAL_NAMESPACE"], worker.Environment["TEMPORAL_NAMESPACE"])
	}
	if _, ok := s.Environment["TEMPORAL_ADDRESS"]; !ok {
		bad("%s: TEMPORAL_ADDRESS is not set: the API would look for Temporal in its own container", name)
	}
	local, err := hostPath(s, config)
	if err != nil {
		bad("%s: --config %s: %v", name, config, err)
		return problems
	}
	got, err := httpapi.LoadConfig(local)
	if err != nil {
		bad("%s: %v", name, err)
		return problems
	}
	if wantCfg := APIConfig(lab.NexusTenant, composeAPIToken); !reflect.DeepEqual(got, wantCfg) {
		bad("%s: %s is %+v; want %+v: tenant %s's token %s by its hash, as the native topology writes its own (deploy.APIConfig)",
			name, config, got, wantCfg, lab.NexusTenant, composeAPIToken)
	}
	return problems
}

// hostPath maps a path inside a service's container to the repository file
// a bind mount puts there (its source is relative to the compose file's
// folder).
func hostPath(s service, inContainer string) (string, error) {
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
			continue
		}
		if rel, ok := strings.CutPrefix(inContainer, parts[1]+"/"); ok {
			p := filepath.Join(composeDir, parts[0], rel)
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("mounted from %s, which does not exist", p)
			}
			return p, nil
		}
		if inContainer == parts[1] {
			return filepath.Join(composeDir, parts[0]), nil
		}
	}
	return "", fmt.Errorf("%s is not in a bind mount of the repository", inContainer)
}

var saArg = regexp.MustCompile(`--name\s+(\S+)\s+--type\s+(\S+)`)

// checkSearchAttributes: the setup job creates exactly Courier's attributes.
func checkSearchAttributes(name, script string) []string {
	var problems []string
	var created []string
	for _, m := range saArg.FindAllStringSubmatch(script, -1) {
		created = append(created, m[1])
		if m[2] != "Keyword" {
			problems = append(problems, fmt.Sprintf("%s: search attribute %s has type %s, want Keyword", name, m[1], m[2]))
		}
	}
	want := slices.Sorted(slices.Values(workflows.SearchAttributeNames))
	slices.Sort(created)
	if !slices.Equal(created, want) {
		problems = append(problems, fmt.Sprintf("%s creates search attributes %v, want exactly %v", name, created, want))
	}
	return problems
}

// checkVersions pins Temporal to the server and UI the rest of the
// repository is built and tested against (see devserver.CLIVersion).
func checkVersions(c composeFile) []string {
	want := map[string]string{
		"temporalio/server:":      "1.29.",
		"temporalio/admin-tools:": "1.29.",
		"temporalio/ui:":          "2.42.",
	}
	var problems []string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range c.Services {
			if !yield(n) {
				return
			}
		}
	}) {
		img := c.Services[name].Image
		for prefix, version := range want {
			if tag, ok := strings.CutPrefix(img, prefix); ok && !strings.HasPrefix(tag, version) {
				problems = append(problems, fmt.Sprintf("%s: %s, want %s%s*", name, img, prefix, version))
			}
		}
	}
	return problems
}

func flagValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

// stage is one FROM of a Dockerfile, with what the checks read of it.
type stage struct {
	name, base, user, entrypoint string
	copies                       []string
}

// checkDockerfile: a multi-stage build with the module's Go version into
// two non-root images: the default target, product, carries courier alone
// with courier as its entrypoint; the lab target carries courier-lab (and
// the courier it runs), compose's sandbox.
func checkDockerfile(file string) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var stages []*stage
	byName := map[string]*stage{}
	var builds string
	s := bufio.NewScanner(bytes.NewReader(b))
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		instr, rest, _ := strings.Cut(line, " ")
		if strings.ToUpper(instr) != "FROM" && len(stages) == 0 {
			continue
		}
		switch strings.ToUpper(instr) {
		case "FROM":
			f := strings.Fields(rest)
			st := &stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
				byName[st.name] = st
			}
			if parent := byName[st.base]; parent != nil { // USER and ENTRYPOINT carry over
				st.user, st.entrypoint = parent.user, parent.entrypoint
				st.copies = slices.Clone(parent.copies)
			}
			stages = append(stages, st)
		case "USER":
			stages[len(stages)-1].user = rest
		case "COPY":
			stages[len(stages)-1].copies = append(stages[len(stages)-1].copies, rest)
		case "RUN":
			if strings.Contains(rest, "go build") {
				builds += rest + "\n"
			}
		case "ENTRYPOINT":
			stages[len(stages)-1].entrypoint = rest
		}
	}
	if len(stages) < 2 {
		bad("Dockerfile: want a multi-stage build (a Go stage, then a small runtime stage)")
		return problems
	}
	for _, pkg := range []string{"./cmd/courier\n", "./cmd/courier-lab\n"} {
		if !strings.Contains(builds, pkg) {
			bad("Dockerfile: no `go build ... %s`", strings.TrimSpace(pkg))
		}
	}
	if gov := goVersion(); !strings.HasPrefix(stages[0].base, "golang:"+gov) {
		bad("Dockerfile: build stage %q does not use Go %s from go.mod", stages[0].base, gov)
	}
	product := stages[len(stages)-1] // the default target
	if product.name != "product" {
		bad("Dockerfile: the last stage, the default target, must be named product, not %q", product.name)
	}
	if lab := byName["lab"]; lab == nil {
		bad("Dockerfile: no stage named lab (compose's sandbox runs courier-lab from it)")
	} else if lab.entrypoint != `["courier-lab"]` {
		bad(`Dockerfile: the lab's ENTRYPOINT must be ["courier-lab"], got %s`, lab.entrypoint)
	}
	for _, st := range []*stage{product, byName["lab"]} {
		if st == nil {
			continue
		}
		if u := st.user; u == "" || u == "root" || u == "0" {
			bad("Dockerfile: the %s image must run as a non-root USER, not %q", st.name, u)
		}
	}
	if product.entrypoint != `["courier"]` {
		bad(`Dockerfile: the product's ENTRYPOINT must be ["courier"], got %s`, product.entrypoint)
	}
	for _, cp := range product.copies {
		if strings.Contains(cp, "courier-lab") {
			bad("Dockerfile: the product image carries the lab (%s): only courier ships", cp)
		}
	}
	return problems
}

func goVersion() string {
	b, _ := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(b)
	if m == nil {
		return "?"
	}
	return string(m[1])
}

// flagLine is a flag's line in a command's -h: "      --name ..." or
// "  -v, --name ...".
var flagLine = regexp.MustCompile(`(?m)^\s+(?:-[a-z0-9], )?--([a-z][a-z0-9-]*)`)

// programFlags reads the flags of a program's subcommand.
type programFlags func(program, sub string) (map[string]bool, error)

// courierFlags builds courier and courier-lab once and reads each
// subcommand's flags from its -h, so the compose commands are checked
// against the real thing.
func courierFlags(t *testing.T) programFlags {
	t.Helper()
	dir := buildPrograms(t)
	var mu sync.Mutex
	cache := map[string]map[string]bool{}
	return func(program, sub string) (map[string]bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if f, ok := cache[program+" "+sub]; ok {
			return f, nil
		}
		out, err := exec.Command(filepath.Join(dir, program), sub, "-h").CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("%v: %s", err, firstLine(out))
		}
		// An unknown word's -h prints the program's own help, and exits 0.
		if !strings.HasPrefix(string(out), "usage: "+program+" "+sub+" ") {
			return nil, fmt.Errorf("no such command (-h says %q)", firstLine(out))
		}
		f := map[string]bool{}
		for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
			f[m[1]] = true
		}
		cache[program+" "+sub] = f
		return f, nil
	}
}

var (
	buildOnce sync.Once
	builtDir  string
	buildErr  error
)

// buildPrograms builds both programs into one folder, once.
func buildPrograms(t *testing.T) string {
	buildOnce.Do(func() {
		if builtDir, buildErr = os.MkdirTemp("", "courier-deploy-test"); buildErr != nil {
			return
		}
		out, err := exec.Command("go", "build", "-o", builtDir, "../cmd/courier", "../cmd/courier-lab").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/courier ./cmd/courier-lab: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return builtDir
}

func firstLine(b []byte) string {
	l, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return l
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// TestComposeWebUIMatchesDev: the compose file's web UI has the action
// switches `courier-lab dev` serves its UI with (no start, reset, terminate,
// cancel or batch actions; signals and updates on), under the names the
// pinned ui-server reads.
func TestComposeWebUIMatchesDev(t *testing.T) {
	c := loadCompose(t)
	ui, ok := c.Services["temporal-ui"]
	require.True(t, ok, "docker-compose.yml has no temporal-ui service")
	require.Equal(t, "temporalio/ui:"+strings.TrimPrefix(devserver.UIServerVersion, "v"), ui.Image,
		"the compose UI and the dev stack's UI server are one version")
	for _, s := range devserver.UISettings {
		require.Equal(t, strconv.FormatBool(s.Value), ui.Environment[s.Env], "temporal-ui: %s", s.Env)
	}

	// The names are the ones the ui-server image's config template reads.
	out, err := exec.Command("go", "mod", "download", "-json",
		"github.com/temporalio/ui-server/v2@"+devserver.UIServerVersion).Output()
	require.NoError(t, err, "the ui-server module (make ui-server fetches it)")
	var mod struct{ Dir string }
	require.NoError(t, json.Unmarshal(out, &mod))
	tmpl, err := os.ReadFile(filepath.Join(mod.Dir, "config", "docker.yaml"))
	require.NoError(t, err)
	for _, s := range devserver.UISettings {
		require.Regexp(t, regexp.MustCompile(`(?m)^`+s.Key+`: \{\{ env "`+s.Env+`"`), string(tmpl),
			"ui-server %s reads %s as %s", devserver.UIServerVersion, s.Env, s.Key)
	}
}

// TestComposeServerRunsLikeDev: the compose server's dynamic config turns on
// what `courier-lab dev`'s server runs with for speed (eager activities), and
// runs as many batch jobs at once.
func TestComposeServerRunsLikeDev(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "dynamicconfig", "courier.yaml"))
	require.NoError(t, err)
	var dc map[string][]struct {
		Value       any            `yaml:"value"`
		Constraints map[string]any `yaml:"constraints"`
	}
	require.NoError(t, yaml.Unmarshal(b, &dc))
	require.Contains(t, strings.Join(devserver.DynamicConfigArgs(), " "), devserver.EagerActivities+"=true")
	require.Len(t, dc[devserver.EagerActivities], 1, "courier.yaml sets %s", devserver.EagerActivities)
	require.Equal(t, true, dc[devserver.EagerActivities][0].Value)
	batch := devserver.MaxConcurrentBatchJobsSetting
	require.Contains(t, devserver.DynamicConfigArgs(), fmt.Sprintf("%s=%d", batch, devserver.MaxConcurrentBatchJobs))
	require.Len(t, dc[batch], 1, "courier.yaml sets %s", batch)
	require.Equal(t, devserver.MaxConcurrentBatchJobs, dc[batch][0].Value)
}

// TestNexusCallbacksReachAnInternalFrontend: a Nexus operation's callback
// carries no token, so the shared dynamic config sends it to an internal
// frontend, native node 1's, on the port compose's server gives its own,
// and allows callbacks there alone, from Courier's namespace alone;
// compose's setup job routes the lab
// tenant's endpoint to the task queue its worker serves.
func TestNexusCallbacksReachAnInternalFrontend(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, DynamicConfig))
	require.NoError(t, err)
	var dc map[string][]struct {
		Value       any            `yaml:"value"`
		Constraints map[string]any `yaml:"constraints"`
	}
	require.NoError(t, yaml.Unmarshal(b, &dc))
	n1, _ := TopologyNode(1)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(n1.InternalHTTP))
	require.Len(t, dc["component.nexusoperations.callback.endpoint.template"], 1)
	require.Equal(t, "http://"+addr+"/namespaces/{{.NamespaceName}}/nexus/callback",
		dc["component.nexusoperations.callback.endpoint.template"][0].Value)
	require.Len(t, dc["component.callbacks.allowedAddresses"], 1)
	require.Equal(t, []any{map[string]any{"Pattern": addr, "AllowInsecure": true}}, dc["component.callbacks.allowedAddresses"][0].Value)
	require.Equal(t, map[string]any{"namespace": "default"}, dc["component.callbacks.allowedAddresses"][0].Constraints,
		"only Courier's namespace may attach callbacks to the internal frontend")

	c := loadCompose(t)
	require.Equal(t, strconv.Itoa(n1.InternalHTTP), c.Services["temporal"].Environment["INTERNAL_FRONTEND_HTTP_PORT"])
	require.Equal(t, lab.NexusTenant, flagValue(c.Services["worker"].Command, "--nexus-tenant"))
	setup := strings.Join(c.Services["temporal-setup"].Command, "\n")
	require.Contains(t, setup, "--namespace "+lab.CallerNamespace)
	require.Regexp(t, `endpoint create --name `+lab.NexusEndpoint(lab.NexusTenant)+`\s+\\\s+--target-namespace default --target-task-queue `+workflows.NexusTaskQueue(lab.NexusTenant)+`\n`, setup)
}

// serverConfig is what the checks read of a rendered server configuration
// (the pinned server's render-config).
type serverConfig struct {
	Persistence struct {
		NumHistoryShards int                  `yaml:"numHistoryShards"`
		DefaultStore     string               `yaml:"defaultStore"`
		VisibilityStore  string               `yaml:"visibilityStore"`
		Datastores       map[string]datastore `yaml:"datastores"`
	} `yaml:"persistence"`
	Services map[string]struct {
		RPC struct {
			GRPCPort       int `yaml:"grpcPort"`
			MembershipPort int `yaml:"membershipPort"`
			HTTPPort       int `yaml:"httpPort"`
		} `yaml:"rpc"`
	} `yaml:"services"`
	Global struct {
		Authorization authorization `yaml:"authorization"`
		Metrics       struct {
			Prometheus struct {
				ListenAddress string `yaml:"listenAddress"`
			} `yaml:"prometheus"`
		} `yaml:"metrics"`
	} `yaml:"global"`
	DynamicConfigClient struct {
		Filepath string `yaml:"filepath"`
	} `yaml:"dynamicConfigClient"`
}

type authorization struct {
	JWTKeyProvider struct {
		KeySourceURIs []string `yaml:"keySourceURIs"`
	} `yaml:"jwtKeyProvider"`
	PermissionsClaimName string `yaml:"permissionsClaimName"`
	Audience             string `yaml:"audience"`
	Authorizer           string `yaml:"authorizer"`
	ClaimMapper          string `yaml:"claimMapper"`
}

type datastore struct {
	SQL *struct {
		PluginName   string `yaml:"pluginName"`
		DatabaseName string `yaml:"databaseName"`
		ConnectAddr  string `yaml:"connectAddr"`
	} `yaml:"sql"`
}

// stores are the plugin and database of the default and visibility stores.
func (c serverConfig) stores() (plugin string, dbs []string, err error) {
	for _, name := range []string{c.Persistence.DefaultStore, c.Persistence.VisibilityStore} {
		ds := c.Persistence.Datastores[name].SQL
		if ds == nil {
			return "", nil, fmt.Errorf("store %q is not an SQL store", name)
		}
		if plugin != "" && ds.PluginName != plugin {
			return "", nil, fmt.Errorf("the stores use two plugins, %s and %s", plugin, ds.PluginName)
		}
		plugin = ds.PluginName
		dbs = append(dbs, ds.DatabaseName)
	}
	return plugin, dbs, nil
}

// render renders the server configuration in dir (its courier.yaml) with
// exactly env, by running the pinned server's render-config.
type render func(dir string, env []string) (serverConfig, string, error)

func serverRenderer(t *testing.T) render {
	t.Helper()
	bin := filepath.Join(repoRoot, "bin", "temporal-server", "server")
	if _, err := os.Stat(bin); err != nil {
		// As `make temporal-server` does.
		t.Logf("building the Temporal server %s into %s (once; minutes)", ServerVersion, filepath.Dir(bin))
		abs, err := filepath.Abs(filepath.Dir(bin))
		require.NoError(t, err)
		cmd := exec.Command("go", "install", "go.temporal.io/server/cmd/server@"+ServerVersion)
		cmd.Env = append(os.Environ(), "GOBIN="+abs)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "build the Temporal server: %s", out)
	}
	return func(dir string, env []string) (serverConfig, string, error) {
		// render-config reads --config as is; start joins it to --root.
		cmd := exec.Command(bin, "--config", dir, "--env", ServerConfigEnv, "render-config")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return serverConfig{}, "", fmt.Errorf("render %s with %v: %v: %s", dir, env, err, strings.TrimSpace(stderr.String()))
		}
		var c serverConfig
		return c, string(out), yaml.Unmarshal(out, &c)
	}
}

func envList(m map[string]string) []string {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		env = append(env, k+"="+m[k])
	}
	return env
}

// TestComposeAndTopologyShareServerConfig: compose's server and the native
// topology's nodes run on one configuration file, and rendered (by the
// pinned server itself) with compose's environment and with each node's,
// it gives the same stores, shard count and dynamic config file; the
// schema job sets up those databases with that plugin, the setup job
// creates Courier's search attributes (the topology creates them with
// lab.EnsureNamespace, from the same list), and the nodes differ only by
// their ports.
func TestComposeAndTopologyShareServerConfig(t *testing.T) {
	require.Empty(t, checkServerConfig(loadCompose(t), filepath.Join(repoRoot, ServerConfigDir), serverRenderer(t)))
}

// The check fails when either side changes alone.
func TestServerConfigCheckCatchesMistakes(t *testing.T) {
	r := serverRenderer(t)
	cfg, err := os.ReadFile(filepath.Join(repoRoot, ServerConfigDir, ServerConfigEnv+".yaml"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		break_ func(c *composeFile)
		config func(string) string
		want   string
	}{
		{name: "compose without the internal frontend", break_: inService("temporal", func(s *service) {
			s.Entrypoint = slices.DeleteFunc(slices.Clone(s.Entrypoint), func(a string) bool { return a == "internal-frontend" })
		}), want: "starts services"},
		{name: "compose lets callers in unchecked", break_: inService("temporal", func(s *service) {
			s.Entrypoint = append(slices.Clone(s.Entrypoint), "--allow-no-auth")
		}), want: "--allow-no-auth"},
		{name: "config without an authorizer", config: func(s string) string {
			return strings.Replace(s, "authorizer: default", "authorizer: \"\"", 1)
		}, want: "default authorizer"},
		{name: "config wants another audience", config: func(s string) string {
			return strings.Replace(s, `default "courier"`, `default "temporal"`, 1)
		}, want: "audience"},
		{name: "compose runs the image's own config", break_: inService("temporal", func(s *service) {
			s.Entrypoint = nil
		}), want: "entrypoint"},
		{name: "compose mounts another folder", break_: inService("temporal", func(s *service) {
			s.Volumes = slices.Clone(s.Volumes)
			s.Volumes[0] = "./postgres:/etc/temporal/config/courier:ro"
		}), want: "deploy/temporal"},
		{name: "config folder not joined to the root", break_: inService("temporal", func(s *service) {
			s.Entrypoint = slices.Clone(s.Entrypoint)
			s.Entrypoint[2] = "/"
		}), want: "/config/courier"},
		{name: "another dynamic config", break_: func(c *composeFile) {
			c.Services["temporal"].Environment["DYNAMIC_CONFIG_FILE_PATH"] = "/etc/temporal/config/dynamicconfig/docker.yaml"
		}, want: "dynamic config"},
		{name: "schema job on another plugin", break_: inService("temporal-schema", func(s *service) {
			s.Command = stringList{strings.ReplaceAll(s.Command[0], "--plugin postgres12", "--plugin postgres12_pgx")}
		}), want: "postgres12_pgx"},
		{name: "frontend on a port compose does not publish", break_: func(c *composeFile) {
			c.Services["temporal"].Environment["FRONTEND_GRPC_PORT"] = "7236"
		}, want: "7236"},
		{name: "config renames a database", config: func(s string) string {
			return strings.Replace(s, "databaseName: temporal_visibility", "databaseName: visibility", 1)
		}, want: "visibility"},
		{name: "config takes the shard count from the environment", break_: func(c *composeFile) {
			c.Services["temporal"].Environment["NUM_HISTORY_SHARDS"] = "8"
		}, config: func(s string) string {
			return strings.Replace(s, "numHistoryShards: 4", `numHistoryShards: {{ env "NUM_HISTORY_SHARDS" | default "4" }}`, 1)
		}, want: "numHistoryShards"},
		{name: "config reads a port under another name than the nodes set", config: func(s string) string {
			return strings.Replace(s, `"HISTORY_GRPC_PORT"`, `"HISTORY_PORT"`, 1)
		}, want: "history"},
		{name: "config sets something per node besides ports", config: func(s string) string {
			return strings.Replace(s, "level: info", `level: {{ if eq (env "FRONTEND_GRPC_PORT") "23233" }}debug{{ else }}info{{ end }}`, 1)
		}, want: "differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadCompose(t)
			for name, s := range c.Services {
				s.Environment = maps.Clone(s.Environment)
				c.Services[name] = s
			}
			if tc.break_ != nil {
				tc.break_(&c)
			}
			dir := filepath.Join(repoRoot, ServerConfigDir)
			if tc.config != nil {
				dir = t.TempDir()
				require.NoError(t, os.WriteFile(filepath.Join(dir, ServerConfigEnv+".yaml"), []byte(tc.config(string(cfg))), 0o644))
			}
			require.Contains(t, strings.Join(checkServerConfig(c, dir, r), "\n"), tc.want)
		})
	}
}

// checkServerConfig holds compose's temporal service and the native nodes
// to one server configuration, the file in configDir.
func checkServerConfig(c composeFile, configDir string, r render) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	s := c.Services["temporal"]

	// Compose runs the server on the topology's file.
	ep := s.Entrypoint
	start := slices.Index(ep, "start")
	if len(ep) < 2 || ep[0] != "temporal-server" || start < 0 {
		bad("temporal: entrypoint %q: want temporal-server ... start, on the topology's configuration", ep)
		return problems
	}
	// The services the native nodes start, and an authorizer required.
	var services []string
	for i := start + 1; i < len(ep); i++ {
		if ep[i] == "--service" && i+1 < len(ep) {
			services = append(services, ep[i+1])
		}
	}
	if !slices.Equal(services, ServerServices) {
		bad("temporal: starts services %v; the nodes start %v", services, ServerServices)
	}
	if slices.Contains(ep, "--allow-no-auth") {
		bad("temporal: --allow-no-auth: the server checks every caller")
	}
	root, conf, env := flagValue(ep, "--root"), flagValue(ep, "--config"), flagValue(ep, "--env")
	inContainer := path.Join(root, conf) // as the server's start joins them
	mounted, err := hostPath(s, inContainer)
	want := filepath.Join(repoRoot, ServerConfigDir)
	switch {
	case err != nil:
		bad("temporal: config folder %s (--root %s --config %s): %v", inContainer, root, conf, err)
		return problems
	case filepath.Clean(mounted) != want:
		bad("temporal: config folder %s is %s, not %s (the topology's)", inContainer, mounted, ServerConfigDir)
	case env != ServerConfigEnv:
		bad("temporal: --env %q reads %s.yaml, not %s.yaml", env, env, ServerConfigEnv)
	}

	composeCfg, _, err := r(configDir, envList(s.Environment))
	if err != nil {
		bad("temporal: %v", err)
		return problems
	}
	plugin, dbs, err := composeCfg.stores()
	if err != nil {
		bad("temporal: %v", err)
		return problems
	}
	auth := composeCfg.Global.Authorization
	if auth.Authorizer != "default" || auth.ClaimMapper != "default" || len(auth.JWTKeyProvider.KeySourceURIs) == 0 {
		bad("temporal: authorizer %q, claim mapper %q, key sets %v: want Temporal's default authorizer and claim mapper on a JWKS",
			auth.Authorizer, auth.ClaimMapper, auth.JWTKeyProvider.KeySourceURIs)
	}
	if auth.Audience != lab.IssuerAudience {
		bad("temporal: the server wants audience %q, the issuer's tokens carry %q", auth.Audience, lab.IssuerAudience)
	}
	addr := composeCfg.Persistence.Datastores[composeCfg.Persistence.DefaultStore].SQL.ConnectAddr
	problems = append(problems, checkAddress(c, "temporal", "the stores' connectAddr "+addr, addr)...)
	if p := strconv.Itoa(composeCfg.Services["frontend"].RPC.GRPCPort); !slices.Contains(containerPorts(s), p) {
		bad("temporal: the frontend serves on %s, which compose does not publish (%v)", p, containerPorts(s))
	}
	dc := composeCfg.DynamicConfigClient.Filepath
	if !path.IsAbs(dc) {
		dc = path.Join("/etc/temporal", dc) // the image's working folder
	}
	composeDC, err := hostPath(s, dc)
	if err != nil {
		bad("temporal: dynamic config %s: %v", dc, err)
	}

	// The schema job sets up those databases with that plugin.
	script := strings.Join(c.Services["temporal-schema"].Command, "\n")
	for _, m := range regexp.MustCompile(`--plugin (\S+)`).FindAllStringSubmatch(script, -1) {
		if m[1] != plugin {
			bad("temporal-schema: --plugin %s, but the server's stores use %s", m[1], plugin)
		}
	}
	var schemaDBs []string
	for _, m := range regexp.MustCompile(`--db (\S+)`).FindAllStringSubmatch(script, -1) {
		if !slices.Contains(schemaDBs, m[1]) {
			schemaDBs = append(schemaDBs, m[1])
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(schemaDBs)), slices.Sorted(slices.Values(dbs))) {
		bad("temporal-schema sets up databases %v, the server's stores are %v", schemaDBs, dbs)
	}
	problems = append(problems, checkSearchAttributes("temporal-setup", strings.Join(c.Services["temporal-setup"].Command, "\n"))...)

	// Each native node renders to the same stores, shards and dynamic
	// config, on its own ports, and to nothing else of its own.
	var texts []string
	for i := 1; i <= MaxNodes; i++ {
		n, _ := TopologyNode(i)
		cfg, text, err := r(configDir, n.Env())
		if err != nil {
			bad("node %d: %v", i, err)
			return problems
		}
		texts = append(texts, text)
		p, d, err := cfg.stores()
		switch {
		case err != nil:
			bad("node %d: %v", i, err)
		case p != plugin || !slices.Equal(d, dbs):
			bad("node %d: stores %s %v; compose's %s %v", i, p, d, plugin, dbs)
		}
		na := cfg.Global.Authorization
		if !slices.Equal(na.JWTKeyProvider.KeySourceURIs, []string{JWKSURL()}) {
			bad("node %d: key sets %v, want the topology's issuer %s", i, na.JWTKeyProvider.KeySourceURIs, JWKSURL())
		}
		na.JWTKeyProvider = auth.JWTKeyProvider
		if !reflect.DeepEqual(na, auth) {
			bad("node %d: authorization %+v; compose's %+v", i, na, auth)
		}
		if cfg.Persistence.NumHistoryShards != composeCfg.Persistence.NumHistoryShards {
			bad("node %d: numHistoryShards %d; compose's %d", i, cfg.Persistence.NumHistoryShards, composeCfg.Persistence.NumHistoryShards)
		}
		nodeDC := filepath.Join(repoRoot, cfg.DynamicConfigClient.Filepath) // the nodes run in the checkout
		if filepath.IsAbs(cfg.DynamicConfigClient.Filepath) {
			nodeDC = cfg.DynamicConfigClient.Filepath
		}
		if _, err := os.Stat(nodeDC); err != nil || (composeDC != "" && filepath.Clean(nodeDC) != filepath.Clean(composeDC)) {
			bad("node %d: dynamic config %s; compose's is %s", i, nodeDC, composeDC)
		}
		for svc, want := range map[string][2]int{
			"frontend": {n.Frontend, n.FrontendRing}, "history": {n.History, n.HistoryRing},
			"matching": {n.Matching, n.MatchingRing}, "worker": {n.Worker, n.WorkerRing},
			"internal-frontend": {n.Internal, n.InternalRing},
		} {
			rpc := cfg.Services[svc].RPC
			if rpc.GRPCPort != want[0] || rpc.MembershipPort != want[1] {
				bad("node %d: %s on ports %d (gRPC) and %d (membership), the node's are %d and %d",
					i, svc, rpc.GRPCPort, rpc.MembershipPort, want[0], want[1])
			}
		}
		if cfg.Services["frontend"].RPC.HTTPPort != n.FrontendHTTP || cfg.Global.Metrics.Prometheus.ListenAddress != fmt.Sprintf("127.0.0.1:%d", n.Metrics) {
			bad("node %d: frontend HTTP %d and metrics %s, the node's are %d and %d", i,
				cfg.Services["frontend"].RPC.HTTPPort, cfg.Global.Metrics.Prometheus.ListenAddress, n.FrontendHTTP, n.Metrics)
		}
	}
	n1, _ := TopologyNode(1)
	n2, _ := TopologyNode(2)
	same := texts[1]
	for i, p := range n2.Ports() {
		same = strings.ReplaceAll(same, strconv.Itoa(p), strconv.Itoa(n1.Ports()[i]))
	}
	if same != texts[0] {
		bad("nodes 1 and 2 differ by more than their ports")
	}
	return problems
}

// TestServerVersionPinned: the Makefile builds the server compose runs.
func TestServerVersionPinned(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^TEMPORAL_SERVER_VERSION := (\S+)$`).FindSubmatch(b)
	require.NotNil(t, m, "Makefile sets TEMPORAL_SERVER_VERSION")
	require.Equal(t, ServerVersion, string(m[1]))
	c := loadCompose(t)
	v := strings.TrimPrefix(ServerVersion, "v")
	require.Equal(t, "temporalio/server:"+v, c.Services["temporal"].Image)
	require.True(t, strings.HasPrefix(c.Services["temporal-schema"].Image, "temporalio/admin-tools:"+v+"-"), c.Services["temporal-schema"].Image)
}

// TestInitCreatesTheLedger: PostgreSQL's first-start script creates the
// outcome ledger's schema and table exactly as `courier ledger init` does,
// as the courier role, in its database.
func TestInitCreatesTheLedger(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("postgres", "init.sql"))
	require.NoError(t, err)
	_, after, ok := strings.Cut(string(b), "\\connect courier courier\n")
	require.True(t, ok, "init.sql connects to the courier database as courier before creating the ledger")
	require.Contains(t, after, sqlstore.PostgresSchema)
}

// TestComposeAndTopologyAgreeOnAPI: beside the service checks above (the
// topology's arguments, configuration shape and role in compose), the
// api role starts deliveries as a worker does, the topology's API port is
// in its range and no other process's, and the compose file names the
// dev token whose hash its configuration holds.
func TestComposeAndTopologyAgreeOnAPI(t *testing.T) {
	api, err := lab.RoleNamed(APIRole)
	require.NoError(t, err)
	worker, err := lab.RoleNamed("worker")
	require.NoError(t, err)
	require.Equal(t, worker.Permissions, api.Permissions, "the api role must hold what starting a Delivery needs, the workers' write on Courier's namespace")

	require.True(t, APIPort >= 23000 && APIPort < 23500, "the topology's ports are 23000-23499")
	taken := []int{PostgresPort, SandboxPort, IssuerPort}
	for i := range 3 {
		taken = append(taken, WorkerMetricsPort+i)
	}
	for n := 1; n <= MaxNodes; n++ {
		node, err := TopologyNode(n)
		require.NoError(t, err)
		taken = append(taken, node.Ports()...)
	}
	require.NotContains(t, taken, APIPort)

	b, err := os.ReadFile(filepath.Join(composeDir, "docker-compose.yml"))
	require.NoError(t, err)
	require.Contains(t, string(b), "Bearer "+composeAPIToken, "the compose file shows the dev token whose hash api.compose.json holds")
}
