// Package tlstest makes throwaway certificate authorities and certificates
// for tests, written as PEM files into a test's temporary directory, so
// that no key is ever committed.
package tlstest

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
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority whose files live in Dir.
type CA struct {
	Name   string
	Dir    string
	CAFile string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
}

var serial atomic.Int64

// NewCA makes a CA named name in a new temporary directory of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Name: name, Dir: t.TempDir(), cert: cert, key: key}
	ca.CAFile = filepath.Join(ca.Dir, "ca.pem")
	writePEM(t, ca.CAFile, "CERTIFICATE", der)
	return ca
}

// Pair is a certificate and key file.
type Pair struct{ CertFile, KeyFile string }

// Issue makes a certificate for name, valid for server and client use, for
// 127.0.0.1, ::1 and localhost (and the extra hosts), and writes it to
// Dir/name.pem and Dir/name-key.pem; issuing the same name again replaces
// the files (a rotation).
func (ca *CA) Issue(t testing.TB, name string, hosts ...string) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)),
		Subject:      pkix.Name{CommonName: name, Organization: []string{ca.Name}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	p := Pair{CertFile: filepath.Join(ca.Dir, name+".pem"), KeyFile: filepath.Join(ca.Dir, name+"-key.pem")}
	// The key first, the certificate last: a watcher that sees the new
	// certificate also finds its key.
	writePEM(t, p.KeyFile, "EC PRIVATE KEY", kder)
	writePEM(t, p.CertFile, "CERTIFICATE", der)
	return p
}

// writePEM writes through a temporary file and a rename, as an operator's
// rotation should, so a reader never sees half a file.
func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}
