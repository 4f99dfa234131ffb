// Package deploy holds what docker-compose.yml mounts (the Temporal dynamic
// config, PostgreSQL's first-start script) and the test that checks the
// compose file and the Dockerfile by construction, since no Docker engine
// runs where the tests do.
package deploy
