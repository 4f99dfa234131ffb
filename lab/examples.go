package lab

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/abde64c9/courier/destinations"
	"github.com/abde64c9/courier/lab/config"
)

// Example is one destinations file of examples/destinations.
type Example struct {
	File   string
	Config destinations.Config
}

// Examples loads every destinations file in dir (examples/destinations) the way a
// worker does, with URLs at the sandbox's dev address moved to sandboxURL.
func Examples(dir, sandboxURL string) ([]Example, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no destinations files in %s", dir)
	}
	sort.Strings(files)
	dev := "http://" + config.DevSandboxAddr
	var out []Example
	for _, f := range files {
		cfg, err := destinations.Load(f)
		if err != nil {
			return nil, err
		}
		for name, d := range cfg.Destinations {
			if !strings.HasPrefix(d.URL, dev) {
				return nil, fmt.Errorf("%s: destination %q: url %s is not at the sandbox's %s", f, name, d.URL, dev)
			}
			d.URL = sandboxURL + strings.TrimPrefix(d.URL, dev)
			if d.LookupURL != "" {
				d.LookupURL = sandboxURL + strings.TrimPrefix(d.LookupURL, dev)
			}
			cfg.Destinations[name] = d
		}
		out = append(out, Example{File: filepath.Base(f), Config: cfg})
	}
	return out, nil
}
