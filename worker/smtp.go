package worker

import (
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destination/smtpdest"
	"github.com/abde64c9/courier/destinations"
)

// openSMTP opens the adapter of a destination with adapter smtp. The
// adapter checks the addresses' form, so a file the workers cannot send
// with stops them at start, each mistake named by its field.
func openSMTP(d destinations.Destination) (destination.Adapter, error) {
	s := d.SMTP
	o := smtpdest.Options{Addr: s.Addr, From: s.From, To: s.To, Domain: s.Domain}
	if err := o.Check(); err != nil {
		return nil, destinations.Prefixed("smtp.", err)
	}
	return smtpdest.New(o)
}
