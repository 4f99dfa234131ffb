// Package config holds the destinations file `courier-lab dev` runs against
// the sandbox, embedded so the binary works from any directory; lab only
// (the dev stack and courier-lab import it). The file docker-compose mounts
// into the worker is deploy/config's.
package config

import _ "embed"

// Dev is destinations.dev.json: one destination of each dedup kind against
// the sandbox at DevSandboxAddr, and a SQLite ledger under .courier/.
//
//go:embed destinations.dev.json
var Dev []byte

// DevSandboxAddr is the sandbox address the dev file's URLs point at.
const DevSandboxAddr = "127.0.0.1:8081"
