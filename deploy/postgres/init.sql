-- Runs once, when the PostgreSQL volume is first initialised. The image has
-- already created the "temporal" database for POSTGRES_USER; the schema job
-- (temporal-schema in docker-compose.yml) fills both Temporal databases.
CREATE DATABASE temporal_visibility OWNER temporal;

-- The ledger destination of deploy/config/destinations.compose.json: a role of its
-- own, so the worker cannot touch Temporal's tables.
CREATE ROLE courier LOGIN PASSWORD 'courier';
CREATE DATABASE courier OWNER courier;

-- The outcome ledger: the workers' record of every operation's outcome, in a
-- schema of its own in the courier database, owned by the courier role
-- (`courier ledger init` creates the same; go test ./deploy compares them).
\connect courier courier
CREATE SCHEMA IF NOT EXISTS courier_ledger;

CREATE TABLE IF NOT EXISTS courier_ledger.outcomes (
	key           TEXT PRIMARY KEY,
	fingerprint   TEXT NOT NULL,
	status        TEXT NOT NULL,
	destination   TEXT NOT NULL,
	receipt       BYTEA,
	workflow_id   TEXT NOT NULL,
	run_id        TEXT NOT NULL,
	principal     TEXT NOT NULL DEFAULT '',
	first_attempt TIMESTAMPTZ,
	recorded      TIMESTAMPTZ NOT NULL
);

CREATE INDEX IF NOT EXISTS outcomes_recorded ON courier_ledger.outcomes (recorded);
