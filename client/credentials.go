package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/raftmq/raftmq/mq"
)

// Credentials are a user's access key and secret key: with them every call
// carries a credential signed with the secret (HMAC-SHA256 over the
// method, the time and a nonce; docs/security.md), which a node with
// --auth permissive or enforcing checks. The secret never leaves the
// client.
type Credentials struct {
	AccessKey string
	SecretKey []byte
}

// ReadSecretFile reads a secret key file: its contents without a trailing
// line break ("-": standard input).
func ReadSecretFile(path string) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return nil, fmt.Errorf("secret key file %s: empty", path)
	}
	return []byte(s), nil
}

// validate checks what a credential can carry.
func (c *Credentials) validate() error {
	if c.AccessKey == "" || strings.ContainsAny(c.AccessKey, " \t\r\n") {
		return fmt.Errorf("access key %q: want a user name without spaces", c.AccessKey)
	}
	if len(c.SecretKey) == 0 {
		return fmt.Errorf("access key %s: no secret key", c.AccessKey)
	}
	return nil
}

// PerRPCCredentials signs every call of a gRPC connection with c
// (grpc.WithPerRPCCredentials), for callers of the api package without a
// Client.
func (c Credentials) PerRPCCredentials() credentials.PerRPCCredentials { return callCredentials{c} }

// callCredentials signs each call (grpc.PerRPCCredentials).
type callCredentials struct{ c Credentials }

func (cc callCredentials) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	ri, ok := credentials.RequestInfoFromContext(ctx)
	if !ok {
		return nil, errors.New("credentials: no method to sign")
	}
	return map[string]string{mq.CallCredentialKey: mq.SignCall(cc.c.AccessKey, cc.c.SecretKey, ri.Method, time.Now())}, nil
}

// RequireTransportSecurity is false: the credential reveals no secret and
// expires; TLS keeps it from being replayed within its window
// (docs/security.md).
func (callCredentials) RequireTransportSecurity() bool { return false }
