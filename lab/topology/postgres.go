package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/abde64c9/courier/deploy"
)

// maxConnections is the PostgreSQL setting the topology needs. Each of a
// node's four services opens pools of its own, up to maxConns (20) plus
// visibility's (10) each: 120 a node, so two nodes outgrow PostgreSQL's
// default 100. The server config keeps Temporal's pool sizes; the
// topology's cluster gets room for two nodes and the lab's clients.
const maxConnections = 300

// The databases Temporal's stores use (deploy/temporal/courier.yaml), and
// the schema folder of each in the server module.
var databases = []struct{ name, schema string }{
	{"temporal", "temporal"},
	{"temporal_visibility", "visibility"},
}

// postgres is the topology's PostgreSQL cluster, .ci/postgres.sh's for
// the topology's port: its data and a unix socket folder (trust auth,
// private to the postgres user and root) under /tmp.
type postgres struct {
	base     string
	maxConns int
	// ledger is the workers' outcome ledger: the courier role's database,
	// which .ci/postgres.sh creates beside Temporal's.
	ledger string
}

func pgBase() string { return fmt.Sprintf("/tmp/courier-postgres-%d", deploy.PostgresPort) }

// postgres starts the cluster (installing PostgreSQL if needed) with room
// for two nodes' connections, and creates the temporal role and Temporal's
// databases; fresh drops those databases first.
func (t *topo) postgres(ctx context.Context, fresh bool) (postgres, error) {
	pg := postgres{base: pgBase()}
	logf, err := t.openLog("postgres")
	if err != nil {
		return pg, err
	}
	defer logf.Close()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(t.root, ".ci", "postgres.sh"))
	cmd.Env = append(cleanEnv(), fmt.Sprintf("COURIER_PG_PORT=%d", deploy.PostgresPort))
	cmd.Stderr = logf
	out, err := cmd.Output()
	last := lastLine(out)
	if err != nil || !strings.HasPrefix(last, "export ") {
		return pg, fmt.Errorf(".ci/postgres.sh failed (%v); see %s:\n%s", err, t.procFile("postgres", "log"), t.logTail("postgres"))
	}
	_, pg.ledger, _ = strings.Cut(last, "=")
	db, err := pg.superuser(ctx)
	if err != nil {
		return pg, err
	}
	defer db.Close(context.Background())
	var setting string
	if err := db.QueryRow(ctx, "SHOW max_connections").Scan(&setting); err != nil {
		return pg, err
	}
	if pg.maxConns, _ = strconv.Atoi(setting); pg.maxConns < maxConnections {
		say("PostgreSQL: max_connections %d -> %d (two nodes hold up to 240), restarting the cluster", pg.maxConns, maxConnections)
		if _, err := db.Exec(ctx, fmt.Sprintf("ALTER SYSTEM SET max_connections = %d", maxConnections)); err != nil {
			return pg, err
		}
		db.Close(ctx)
		if err := pgCtl(logf, "restart", "-w", "-t", "60", "-m", "fast", "-l", filepath.Join(pg.base, "server.log")); err != nil {
			return pg, err
		}
		if db, err = pg.superuser(ctx); err != nil {
			return pg, err
		}
		defer db.Close(context.Background())
		pg.maxConns = maxConnections
	}
	var exists bool
	if err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'temporal')").Scan(&exists); err != nil {
		return pg, err
	}
	if !exists {
		if _, err := db.Exec(ctx, "CREATE ROLE temporal LOGIN PASSWORD 'temporal'"); err != nil {
			return pg, err
		}
	}
	for _, d := range databases {
		if fresh {
			if _, err := db.Exec(ctx, "DROP DATABASE IF EXISTS "+d.name+" WITH (FORCE)"); err != nil {
				return pg, err
			}
		}
		if err := db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", d.name).Scan(&exists); err != nil {
			return pg, err
		}
		if !exists {
			if _, err := db.Exec(ctx, "CREATE DATABASE "+d.name+" OWNER temporal"); err != nil {
				return pg, err
			}
		}
	}
	return pg, nil
}

// superuser connects as postgres through the cluster's unix socket.
func (pg postgres) superuser(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := pgx.Connect(cctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", filepath.Join(pg.base, "run"), deploy.PostgresPort))
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL superuser connection on %s: %w", filepath.Join(pg.base, "run"), err)
	}
	return db, nil
}

// temporalDB connects as Temporal does, to its own database.
func temporalDB(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return pgx.Connect(cctx, fmt.Sprintf("postgres://temporal:temporal@127.0.0.1:%d/temporal?sslmode=disable", deploy.PostgresPort))
}

// schemas sets up or upgrades both databases' schemas with
// temporal-sql-tool, from the server module's schema folder; on schemas
// that are current it changes nothing.
func (t *topo) schemas(ctx context.Context) error {
	mod, err := goModDir(ctx, t.root, "go.temporal.io/server@"+deploy.ServerVersion)
	if err != nil {
		return err
	}
	logf, err := t.openLog("schema")
	if err != nil {
		return err
	}
	defer logf.Close()
	for _, d := range databases {
		base := []string{"--plugin", "postgres12", "--ep", "127.0.0.1", "--port", strconv.Itoa(deploy.PostgresPort),
			"--user", "temporal", "--password", "temporal", "--db", d.name}
		versioned := filepath.Join(mod, "schema", "postgresql", "v12", d.schema, "versioned")
		for _, step := range [][]string{{"setup-schema", "-v", "0.0"}, {"update-schema", "-d", versioned}} {
			cmd := exec.CommandContext(ctx, t.sqlTool, append(base, step...)...)
			cmd.Env = cleanEnv()
			cmd.Stdout, cmd.Stderr = logf, logf
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("temporal-sql-tool %s on %s: %w; see %s:\n%s", step[0], d.name, err, t.procFile("schema", "log"), t.logTail("schema"))
			}
		}
	}
	return nil
}

// stopPostgres stops the topology's cluster, as .ci/postgres.sh says to;
// its data stays for the next up.
func stopPostgres() error {
	data := filepath.Join(pgBase(), "data")
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err != nil {
		return nil
	}
	var out bytes.Buffer
	if err := pgCtl(&out, "stop", "-w", "-t", "60", "-m", "fast"); err != nil {
		return fmt.Errorf("stop PostgreSQL: %w: %s", err, strings.TrimSpace(out.String()))
	}
	say("stopped PostgreSQL (data kept in %s)", data)
	return nil
}

// pgCtl runs pg_ctl on the topology's cluster as the postgres user, which
// the server requires.
func pgCtl(log interface{ Write([]byte) (int, error) }, args ...string) error {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		return fmt.Errorf("no pg_ctl under /usr/lib/postgresql/*/bin (.ci/postgres.sh installs it)")
	}
	sort.Slice(bins, func(i, j int) bool { return pgMajor(bins[i]) < pgMajor(bins[j]) })
	u, err := user.Lookup("postgres")
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd := exec.Command(bins[len(bins)-1], append([]string{"-D", filepath.Join(pgBase(), "data")}, args...)...)
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	return cmd.Run()
}

// pgMajor is the major version in /usr/lib/postgresql/<major>/bin/pg_ctl.
func pgMajor(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
