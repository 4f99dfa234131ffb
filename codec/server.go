package codec

import (
	"net/http"
	"strings"

	"go.temporal.io/sdk/converter"
)

// Handler serves the codec for the Temporal web UI and CLI
// (POST /encode, POST /decode), allowing the UI's origin.
func (c *Codec) Handler(uiOrigins ...string) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		for _, o := range uiOrigins {
			if strings.EqualFold(o, origin) {
				w.Header().Set("Access-Control-Allow-Origin", origin)
				w.Header().Set("Access-Control-Allow-Credentials", "true")
				w.Header().Set("Access-Control-Allow-Headers", "Content-Type,X-Namespace,Authorization")
				w.Header().Set("Access-Control-Allow-Methods", "POST,OPTIONS")
			}
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusOK)
			return
		}
		inner.ServeHTTP(w, r)
	})
}
