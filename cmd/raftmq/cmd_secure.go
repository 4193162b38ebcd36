package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/internal/tlsconf"
)

// Files `secure init` writes besides the certificates.
const (
	authKeyFileName     = "auth.key"
	adminSecretFileName = "admin.secret"
)

func secureCommand() *cli.Command {
	return &cli.Command{
		Name:  "secure",
		Usage: "make the files a group with TLS and authentication needs",
		Subcommands: []*cli.Command{{
			Name:  "init",
			Usage: "write a private CA, a certificate for the hosts, the auth key file and the first admin's secret into --dir; files that exist are kept",
			Description: "Writes, when missing: ca.pem and ca-key.pem (a new CA), node.pem and node-key.pem (one certificate for\n" +
				"every node and name server, valid for --hosts), auth.key (the --auth-key-file: 32 random bytes, hex) and\n" +
				"admin.secret (the --auth-admin-secret-file: a random secret). Keys and secrets are mode 0600. Nothing is\n" +
				"overwritten, so running it at every start makes them once. The compose group with TLS and authentication\n" +
				"(`make up-secure`) runs it in a container; docs/security.md.\n\n" +
				"   raftmq secure init --dir ./secure --hosts n1,n2,n3,namesrv,localhost,127.0.0.1",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "dir", Required: true, Usage: "directory to write to (made if missing, mode 0700)"},
				&cli.StringFlag{Name: "hosts", Value: "localhost,127.0.0.1", Usage: "host names and IP addresses the certificate is valid for, comma-separated: every name nodes and clients dial"},
				&cli.DurationFlag{Name: "validity", Value: 365 * 24 * time.Hour, Usage: "how long the CA and the certificate are valid"},
			},
			Action: runSecureInit,
		}},
	}
}

func runSecureInit(c *cli.Context) error {
	dir := c.String("dir")
	var hosts []string
	for _, h := range strings.Split(c.String("hosts"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return usageError(c, "--hosts %q: want at least one host name or IP address", c.String("hosts"))
	}
	made, err := tlsconf.GenerateFiles(dir, hosts, c.Duration("validity"))
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		gen  func() (string, error)
	}{
		{authKeyFileName, func() (string, error) { return randomText(32, hex.EncodeToString) }},
		{adminSecretFileName, func() (string, error) { return randomText(24, base64.RawURLEncoding.EncodeToString) }},
	} {
		wrote, err := writeOnce(filepath.Join(dir, f.name), f.gen)
		if err != nil {
			return err
		}
		if wrote {
			made = append(made, f.name)
		}
	}
	w := c.App.Writer
	if len(made) == 0 {
		fmt.Fprintf(w, "%s: every file was there; nothing written\n", dir)
		return nil
	}
	fmt.Fprintf(w, "%s: wrote %s (certificate for %s)\n", dir, strings.Join(made, ", "), strings.Join(hosts, ","))
	return nil
}

func randomText(n int, enc func([]byte) string) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return enc(b) + "\n", nil
}

// writeOnce writes gen's text to path, mode 0600, unless path exists.
func writeOnce(path string, gen func() (string, error)) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	text, err := gen()
	if err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return false, fmt.Errorf("write %s: %w", path, err)
	}
	return true, f.Close()
}
