package mq

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The credential of one call to raftmq's gRPC API (docs/security.md,
// "Authentication on the gRPC API"): the SDK puts it into the call's
// metadata under CallCredentialKey, the node verifies it. Its value is
//
//	v1 <access key> <unix milliseconds> <nonce> <signature>
//
// where signature = base64url(HMAC-SHA256(secret key,
// "raftmq-call-v1\n" method "\n" access key "\n" milliseconds "\n" nonce)),
// method is the call's full gRPC name ("/raftmq.v1.Broker/Produce") and
// nonce 16 random hex digits. A node accepts it within CallWindow of its own
// clock.
const (
	CallCredentialKey = "raftmq-credential"
	CallWindow        = 5 * time.Minute
	// NodeAccessKey is the access key nodes of one group sign their calls
	// to each other with; it is no valid user name.
	NodeAccessKey = "@node"

	callVersion  = "v1"
	callLabel    = "raftmq-call-v1\n"
	maxCallField = 256
)

// CallCredential is a parsed call credential.
type CallCredential struct {
	AccessKey string
	UnixMilli int64
	Nonce     string
	Signature string
}

// SignCall returns the credential value of one call of method by
// accessKey at now.
func SignCall(accessKey string, secret []byte, method string, now time.Time) string {
	var n [8]byte
	_, _ = rand.Read(n[:]) // never fails (crypto/rand)
	c := CallCredential{AccessKey: accessKey, UnixMilli: now.UnixMilli(), Nonce: hex.EncodeToString(n[:])}
	c.Signature = c.sign(secret, method)
	return strings.Join([]string{callVersion, c.AccessKey, strconv.FormatInt(c.UnixMilli, 10), c.Nonce, c.Signature}, " ")
}

func (c CallCredential) sign(secret []byte, method string) string {
	var buf [256]byte
	msg := append(buf[:0], callLabel...)
	msg = append(msg, method...)
	msg = append(msg, '\n')
	msg = append(msg, c.AccessKey...)
	msg = append(msg, '\n')
	msg = strconv.AppendInt(msg, c.UnixMilli, 10)
	msg = append(msg, '\n')
	msg = append(msg, c.Nonce...)
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(m.Sum(sum[:0]))
}

// ErrCallCredential: a call credential that is not of the form SignCall
// makes.
var ErrCallCredential = errors.New("malformed credential: want \"v1 <access key> <unix ms> <nonce> <signature>\"")

// ParseCallCredential reads a credential value.
func ParseCallCredential(v string) (CallCredential, error) {
	if len(v) > 5*maxCallField {
		return CallCredential{}, ErrCallCredential
	}
	f := strings.Split(v, " ")
	if len(f) != 5 || f[0] != callVersion {
		return CallCredential{}, ErrCallCredential
	}
	for _, s := range f[1:] {
		if s == "" || len(s) > maxCallField {
			return CallCredential{}, ErrCallCredential
		}
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || ms < 0 {
		return CallCredential{}, ErrCallCredential
	}
	return CallCredential{AccessKey: f[1], UnixMilli: ms, Nonce: f[3], Signature: f[4]}, nil
}

// Verify reports whether the credential is secret's signature of a call
// of method, in constant time wherever they differ.
func (c CallCredential) Verify(secret []byte, method string) bool {
	return hmac.Equal([]byte(c.Signature), []byte(c.sign(secret, method)))
}

// Fresh reports whether the credential was made within CallWindow of now.
func (c CallCredential) Fresh(now time.Time) bool {
	d := now.UnixMilli() - c.UnixMilli
	return d <= CallWindow.Milliseconds() && d >= -CallWindow.Milliseconds()
}
