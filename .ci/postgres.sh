#!/usr/bin/env bash
# Starts a throw-away PostgreSQL for Courier's integration tests and prints,
# as its last line (the only one on stdout), the export that enables them:
#
#   eval "$(.ci/postgres.sh)" && go test ./destination/sqldest/...
#
# Installs PostgreSQL from Debian packages if missing (needs root), runs a
# cluster of its own as the postgres user, listening on 127.0.0.1 only, with
# its data under /tmp, and creates database and user "courier". Running it
# again reuses the running cluster. Stop and remove it with:
#
#   su -s /bin/sh postgres -c "$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n1)/pg_ctl -D /tmp/courier-postgres-55432/data stop"
#   rm -rf /tmp/courier-postgres-55432
#
# Settings: COURIER_PG_PORT (55432), COURIER_PG_PASSWORD (courier; keep it
# URL-safe, it goes into the DSN as is).
set -euo pipefail

port=${COURIER_PG_PORT:-55432}
password=${COURIER_PG_PASSWORD:-courier}
base=/tmp/courier-postgres-$port
data=$base/data
sock=$base/run # unix socket, private to the postgres user: trust auth there only

log() { echo "postgres.sh: $*" >&2; }

if [ "$(id -u)" -ne 0 ]; then
	log "run as root (it installs packages and switches to the postgres user)"
	exit 1
fi

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1; }
if [ -z "$(bindir)" ]; then
	log "installing PostgreSQL from Debian packages"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	apt-get install -y postgresql >&2
fi
bin=$(bindir)
if [ -z "$bin" ] || [ ! -x "$bin/pg_ctl" ]; then
	log "no PostgreSQL binaries under /usr/lib/postgresql/*/bin"
	exit 1
fi

# Run a command as the postgres user; initdb and postgres refuse root.
as_postgres() { (cd / && su -s /bin/sh postgres -c "$1"); }

running=false
if [ -s "$data/PG_VERSION" ] && as_postgres "'$bin/pg_ctl' -D '$data' status" >/dev/null 2>&1; then
	running=true
	log "cluster already running on 127.0.0.1:$port"
elif (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
	# Fail clearly if someone else holds the port, rather than in the server log.
	log "port $port is taken by another process; set COURIER_PG_PORT to a free one"
	exit 1
fi

if [ ! -s "$data/PG_VERSION" ]; then
	log "creating cluster in $data ($("$bin/postgres" --version))"
	rm -rf "$base"
	mkdir -p "$data" "$sock"
	chown -R postgres:postgres "$base"
	chmod 700 "$data" "$sock"
	as_postgres "'$bin/initdb' -D '$data' -U postgres --auth-local=trust --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8" >&2
	cat >>"$data/postgresql.conf" <<-EOF
		# courier: throw-away test cluster (.ci/postgres.sh)
		listen_addresses = '127.0.0.1'
		port = $port
		unix_socket_directories = '$sock'
	EOF
fi

if ! $running; then
	log "starting cluster on 127.0.0.1:$port"
	as_postgres "'$bin/pg_ctl' -D '$data' -l '$base/server.log' -w -t 60 start" >&2
fi

psql() { as_postgres "'$bin/psql' -X -q -v ON_ERROR_STOP=1 -h '$sock' -p $port -U postgres -d postgres -tA -c \"$1\""; }
if [ -z "$(psql "SELECT 1 FROM pg_roles WHERE rolname = 'courier'")" ]; then
	psql "CREATE ROLE courier LOGIN"
fi
psql "ALTER ROLE courier PASSWORD '$password'"
if [ -z "$(psql "SELECT 1 FROM pg_database WHERE datname = 'courier'")" ]; then
	psql "CREATE DATABASE courier OWNER courier"
fi
log "database courier ready"

echo "export COURIER_TEST_POSTGRES_DSN=postgres://courier:$password@127.0.0.1:$port/courier?sslmode=disable"
