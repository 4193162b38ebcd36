package acl

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
)

// Sealer encrypts user secrets before they enter the log (AES-256-GCM, a
// fresh nonce each time, the user's name as additional data so a sealed
// secret cannot be moved to another user). Every node of a group needs the
// same key: a sealed secret is replicated as it is.
type Sealer struct {
	aead cipher.AEAD
	node []byte // the group's node secret (NodeSecret)
}

// MinKeyFileBytes is the least a key file holds (it is hashed into the key).
const MinKeyFileBytes = 32

const sealVersion = 1

// NewSealer derives the key from key material (the contents of the node's
// auth key file).
func NewSealer(material []byte) (*Sealer, error) {
	if len(material) < MinKeyFileBytes {
		return nil, fmt.Errorf("auth key: %d bytes, want at least %d", len(material), MinKeyFileBytes)
	}
	h := sha256.New()
	h.Write([]byte("raftmq auth secrets v1\x00"))
	h.Write(material)
	block, err := aes.NewCipher(h.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("auth key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("auth key: %w", err)
	}
	n := sha256.New()
	n.Write([]byte("raftmq node credential v1\x00"))
	n.Write(material)
	return &Sealer{aead: aead, node: n.Sum(nil)}, nil
}

// NodeSecret is the secret the nodes of a group sign their calls to each
// other with (access key mq.NodeAccessKey): derived from the same key
// material as the sealing key, under another label, so every node with the
// group's key file holds it and nothing in the log or on the wire reveals
// it.
func (s *Sealer) NodeSecret() []byte {
	if s == nil {
		return nil
	}
	return s.node
}

// LoadSealer reads a key file.
func LoadSealer(path string) (*Sealer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth key file: %w", err)
	}
	return NewSealer(b)
}

// Seal encrypts user's secret.
func (s *Sealer) Seal(user string, secret []byte) ([]byte, error) {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(secret)+s.aead.Overhead())
	out[0] = sealVersion
	if _, err := rand.Read(out[1:]); err != nil {
		return nil, fmt.Errorf("seal secret: %w", err)
	}
	return s.aead.Seal(out, out[1:], secret, []byte(user)), nil
}

// ErrSealedSecret: a sealed secret does not open with this node's key
// (another key file, or damaged).
var ErrSealedSecret = errors.New("sealed secret does not open with this node's auth key")

// Open decrypts user's sealed secret.
func (s *Sealer) Open(user string, sealed []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n+s.aead.Overhead() || sealed[0] != sealVersion {
		return nil, ErrSealedSecret
	}
	out, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(user))
	if err != nil {
		return nil, ErrSealedSecret
	}
	return out, nil
}
