// Package deploy holds what an operator deploys: docker-compose.yml and the
// Dockerfile it builds from (with the repository root as the context), what
// compose mounts (the Temporal server configuration, its dynamic config,
// PostgreSQL's first-start script, the worker's destinations file and the
// HTTP API's configuration in config/), the native topology's settings (its
// nodes' ports and environment, on the same server configuration, and how
// both run `courier api`; the harness that runs them is lab/topology), and
// the tests that check them: the compose file and the Dockerfile by
// construction, since no Docker engine runs where the tests do, and that
// compose and the native nodes share their server configuration and run
// the API alike.
package deploy
