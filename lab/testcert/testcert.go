// Package testcert issues throwaway certificates for tests that speak TLS
// over loopback. Test support only: tests import it, nothing else links it.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// New issues a certificate for cn (and the names dns: host names, or IP
// addresses such as 127.0.0.1), valid for an
// hour either side of now, for servers and clients alike, signed by parent;
// a nil parent makes it a self-signed CA.
func New(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, dns []string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, d := range dns {
		if ip := net.ParseIP(d); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, d)
		}
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return c, key
}

// WritePEM writes v (DER bytes, or a private key) as a PEM block of type typ
// to dir/name and returns the path.
func WritePEM(t testing.TB, dir, name, typ string, v any) string {
	t.Helper()
	der, ok := v.([]byte)
	if !ok {
		var err error
		der, err = x509.MarshalPKCS8PrivateKey(v)
		require.NoError(t, err)
	}
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return p
}
