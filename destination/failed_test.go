package destination_test

import (
	"bufio"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/abde64c9/courier/destination"
)

// post sends one request to url and returns the transport's error.
func post(t *testing.T, ctx context.Context, url string) error {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"n": 1}`))
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// silent accepts connections, reads each request and then either never
// answers or resets the connection.
func silent(t *testing.T, reset bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil || !reset {
					time.Sleep(5 * time.Second)
					return
				}
				_ = c.(*net.TCPConn).SetLinger(0) // close with RST
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/tickets"
}

func TestFailed(t *testing.T) {
	refused := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/tickets"
	}()
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	for _, c := range []struct {
		name    string
		url     string
		timeout time.Duration
		want    destination.Class
		says    string
	}{
		{"refused dial", refused, time.Second, destination.NotSent, "the connection could not be made"},
		{"name that does not resolve", "http://courier-kit.invalid/tickets", 5 * time.Second, destination.NotSent, "the name did not resolve"},
		{"untrusted certificate", tlsSrv.URL, time.Second, destination.NotSent, "the destination's certificate was refused"},
		{"deadline after the write", silent(t, false), 300 * time.Millisecond, destination.Unknown, "no answer within the attempt's time"},
		{"reset after the write", silent(t, true), time.Second, destination.Unknown, "after the request was written"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), c.timeout)
			defer cancel()
			err := post(t, ctx, c.url)
			require.Error(t, err)
			out := destination.Failed(err, true)
			require.Equal(t, c.want, out.Class, "%v", err)
			require.Contains(t, out.Error, c.says)
		})
	}

	t.Run("nothing written", func(t *testing.T) {
		out := destination.Failed(context.DeadlineExceeded, false)
		require.Equal(t, destination.NotSent, out.Class)
	})
}
