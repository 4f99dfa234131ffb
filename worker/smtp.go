package worker

import (
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destination/smtpdest"
	"github.com/abde64c9/courier/destinations"
)

// openSMTP opens the adapter of a destination with adapter smtp.
func openSMTP(d destinations.Destination) (destination.Adapter, error) {
	return smtpdest.New(d.SMTP.Options())
}
