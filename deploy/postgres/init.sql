-- Runs once, when the PostgreSQL volume is first initialised. The image has
-- already created the "temporal" database for POSTGRES_USER; the schema job
-- (temporal-schema in docker-compose.yml) fills both Temporal databases.
CREATE DATABASE temporal_visibility OWNER temporal;

-- The ledger destination of deploy/config/destinations.compose.json: a role of its
-- own, so the worker cannot touch Temporal's tables.
CREATE ROLE courier LOGIN PASSWORD 'courier';
CREATE DATABASE courier OWNER courier;
