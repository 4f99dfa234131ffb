package worker

import (
	"github.com/abde64c9/courier/destination"
	"github.com/abde64c9/courier/destination/natsdest"
	"github.com/abde64c9/courier/destinations"
)

// openNATS connects a destination with adapter nats to its server and
// checks its stream's duplicate window against the declared key retention.
func openNATS(d destinations.Destination) (destination.Adapter, error) {
	return natsdest.New(natsdest.Options{URL: d.NATS.URL, Stream: d.NATS.Stream, Subject: d.NATS.Subject,
		KeyRetention: d.Contract.KeyRetention.D()})
}
