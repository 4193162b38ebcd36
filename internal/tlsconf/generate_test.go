package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestGenerateFiles: the CA and the certificate are written once, with
// private keys 0600; the certificate verifies against the CA for every
// host given and no other; a CA without its key is an error.
func TestGenerateFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secure")
	made, err := GenerateFiles(dir, []string{"n1", "namesrv", "127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(made, []string{CAKeyFileName, CAFileName, NodeKeyFileName, NodeFileName}) {
		t.Fatalf("made %v", made)
	}
	for _, f := range []string{CAKeyFileName, NodeKeyFileName} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v", f, fi.Mode(), err)
		}
	}
	before, _ := os.ReadFile(filepath.Join(dir, NodeFileName))
	if made, err := GenerateFiles(dir, []string{"other"}, time.Hour); err != nil || len(made) != 0 {
		t.Fatalf("second run: %v %v", made, err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, NodeFileName)); string(after) != string(before) {
		t.Fatal("second run replaced the certificate")
	}
	pool, err := LoadCA(filepath.Join(dir, CAFileName))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, NodeFileName), filepath.Join(dir, NodeKeyFileName))
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(pair.Certificate[0])
	for _, h := range []string{"n1", "namesrv", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: h, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "n2"}); err == nil {
		t.Error("verifies for a host not given")
	}
	// A new certificate from the existing CA once the old one is removed.
	os.Remove(filepath.Join(dir, NodeFileName))
	os.Remove(filepath.Join(dir, NodeKeyFileName))
	if made, err := GenerateFiles(dir, []string{"n2"}, time.Hour); err != nil || !slices.Equal(made, []string{NodeKeyFileName, NodeFileName}) {
		t.Fatalf("reissue: %v %v", made, err)
	}
	os.Remove(filepath.Join(dir, CAKeyFileName))
	os.Remove(filepath.Join(dir, NodeFileName))
	if _, err := GenerateFiles(dir, []string{"n2"}, time.Hour); err == nil || !strings.Contains(err.Error(), "one without the other") {
		t.Fatalf("CA without its key: %v", err)
	}
}
