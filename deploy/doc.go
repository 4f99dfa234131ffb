// Package deploy holds what docker-compose.yml mounts (the Temporal server
// configuration, its dynamic config, PostgreSQL's first-start script), the
// native topology's settings (its nodes' ports and environment, run by
// deploy/topology on the same server configuration), and the tests that
// check the compose file and the Dockerfile by construction, since no
// Docker engine runs where the tests do, and that compose and the native
// nodes share their server configuration.
package deploy
