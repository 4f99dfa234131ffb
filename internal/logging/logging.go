// Package logging builds the one logger Courier's programs log through (the
// worker, the SDK inside it, and every command): a level and a format. The
// product's packages and the command framework share it from below.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// New is a logger at level debug, info, warn or error, in format text or
// json. Everything (Courier and the SDK) logs through it.
func New(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: use text or json", format)
}
