// Package config holds the destinations file `courier-lab dev` runs against
// the sandbox, embedded so the binary works from any directory; lab only
// (the dev stack and courier-lab import it). The file docker-compose mounts
// into the worker is deploy/config's.
package config

import (
	_ "embed"
	"time"
)

// Dev is destinations.dev.json: one destination of each dedup kind against
// the sandbox at DevSandboxAddr, a SQLite ledger under .courier/, a NATS
// stream and a mail sink.
//
//go:embed destinations.dev.json
var Dev []byte

// Where the dev file's destinations point: the sandbox, the NATS server
// (with JetStream, and the stream whose duplicate window is DevNATSWindow)
// and the mail sink.
const (
	DevSandboxAddr = "127.0.0.1:8081"
	DevNATSAddr    = "127.0.0.1:14222"
	DevNATSWindow  = 2 * time.Minute
	DevMailAddr    = "127.0.0.1:2525"
)
