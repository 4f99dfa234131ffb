package destination

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// Failed classifies the error of a call that was to make the effect.
//
// written says whether any byte of the request may have reached the
// connection: pass false only when the adapter knows it cannot have (the
// error came before the write, or a client hook such as httptrace's
// WroteHeaders never fired). Without a write the outcome is NotSent. After
// a possible write it is Unknown, except for the errors that prove the
// destination saw nothing of the request: a failed dial or name lookup, a
// refused connection, a TLS handshake the peer or the certificate check
// refused.
//
// The Outcome's Error quotes err: wrap or redact anything in it that
// carries a credential before calling Failed.
func Failed(err error, written bool) Outcome {
	if err == nil {
		return Outcome{Class: Unknown, Error: "no error and no answer"}
	}
	if !written {
		return Outcome{Class: NotSent, Error: "not sent, failed before the request was written: " + err.Error()}
	}
	if why := beforeWrite(err); why != "" {
		return Outcome{Class: NotSent, Error: fmt.Sprintf("not sent, %s: %v", why, err)}
	}
	return Outcome{Class: Unknown, Error: AfterWrite(err)}
}

// beforeWrite names why err proves that nothing reached the destination,
// or is empty.
func beforeWrite(err error) string {
	var dns *net.DNSError
	var op *net.OpError
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var header tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case errors.As(err, &dns):
		return "the name did not resolve"
	case errors.As(err, &op) && op.Op == "dial", errors.Is(err, syscall.ECONNREFUSED):
		return "the connection could not be made"
	case errors.As(err, &verify), errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid):
		return "the destination's certificate was refused"
	case errors.As(err, &header), errors.As(err, &alert):
		// The peer answered the handshake with something else, or refused
		// it: it processes no request before the handshake completes.
		return "the TLS handshake failed"
	}
	return ""
}

// AfterWrite says what an error after a possible write means, for an
// Unknown outcome's Error.
func AfterWrite(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within the attempt's time after the request was written: " + err.Error()
	case errors.Is(err, context.Canceled):
		return "attempt canceled after the request was written"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection closed after the request was written: " + err.Error()
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "connection reset after the request was written: " + err.Error()
	}
	return "transport error after the request was written: " + err.Error()
}
