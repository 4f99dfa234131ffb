package worker

import (
	"errors"
	"fmt"

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
	err := o.Check()
	if err == nil {
		return smtpdest.New(o)
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			errs = append(errs, fmt.Errorf("smtp.%w", e))
		}
		return nil, errors.Join(errs...)
	}
	return nil, fmt.Errorf("smtp.%w", err)
}
