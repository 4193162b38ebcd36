package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Files GenerateFiles writes in its directory.
const (
	CAFileName      = "ca.pem"
	CAKeyFileName   = "ca-key.pem"
	NodeFileName    = "node.pem"
	NodeKeyFileName = "node-key.pem"
)

// GenerateFiles makes a private CA and one certificate, for server and
// client use, valid for every host in hosts (names and IP addresses), and
// writes them to dir as ca.pem, ca-key.pem, node.pem and node-key.pem
// (keys mode 0600). Files that exist are kept: it returns the names of
// the files it wrote, none when the CA and the certificate were there. A
// CA without its key, or a certificate without the CA, is an error naming
// the file. The keys are ECDSA P-256; the certificates last validity.
func GenerateFiles(dir string, hosts []string, validity time.Duration) ([]string, error) {
	if len(hosts) == 0 {
		return nil, errors.New("generate certificates: no hosts")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("generate certificates: validity %s: want > 0", validity)
	}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dir, name))
		return err == nil
	}
	caCert, caKeyFile, nodeCert, nodeKey := exists(CAFileName), exists(CAKeyFileName), exists(NodeFileName), exists(NodeKeyFileName)
	switch {
	case caCert && nodeCert && nodeKey:
		return nil, nil
	case caCert != caKeyFile:
		return nil, fmt.Errorf("generate certificates: %s and %s: one without the other; remove both to make a new CA", filepath.Join(dir, CAFileName), filepath.Join(dir, CAKeyFileName))
	case nodeCert != nodeKey:
		return nil, fmt.Errorf("generate certificates: %s and %s: one without the other; remove both", filepath.Join(dir, NodeFileName), filepath.Join(dir, NodeKeyFileName))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("generate certificates: %w", err)
	}
	var made []string
	var ca *x509.Certificate
	var caKey *ecdsa.PrivateKey
	if caCert {
		var err error
		if ca, caKey, err = readCA(dir); err != nil {
			return nil, err
		}
	} else {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, fmt.Errorf("generate CA key: %w", err)
		}
		tmpl := &x509.Certificate{SerialNumber: serialNumber(), Subject: pkix.Name{CommonName: "raftmq cluster CA"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validity), IsCA: true, BasicConstraintsValid: true,
			MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, fmt.Errorf("generate CA: %w", err)
		}
		if ca, err = x509.ParseCertificate(der); err != nil {
			return nil, fmt.Errorf("generate CA: %w", err)
		}
		caKey = key
		if err := writeKey(filepath.Join(dir, CAKeyFileName), key); err != nil {
			return nil, err
		}
		if err := writePEM(filepath.Join(dir, CAFileName), "CERTIFICATE", der, 0o644); err != nil {
			return nil, err
		}
		made = append(made, CAKeyFileName, CAFileName)
	}
	if nodeCert {
		return made, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: serialNumber(), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validity), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("generate certificate: %w", err)
	}
	if err := writeKey(filepath.Join(dir, NodeKeyFileName), key); err != nil {
		return nil, err
	}
	if err := writePEM(filepath.Join(dir, NodeFileName), "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return append(made, NodeKeyFileName, NodeFileName), nil
}

func serialNumber() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func readCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CAFileName))
	if err != nil {
		return nil, nil, fmt.Errorf("read CA: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFileName))
	if err != nil {
		return nil, nil, fmt.Errorf("read CA key: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("read CA: %s or %s is not PEM", CAFileName, CAKeyFileName)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("read CA %s: %w", CAFileName, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("read CA key %s (ECDSA expected): %w", CAKeyFileName, err)
	}
	return cert, key, nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := pem.Encode(f, &pem.Block{Type: typ, Bytes: der}); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
