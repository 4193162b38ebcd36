package auth

import (
	"bytes"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/mq"
)

// CheckCall authenticates a call to raftmq's gRPC API by its credential
// (the value of mq.CallCredentialKey, "" when the call has none) and checks
// that its user holds every need. A call signed with the group's node
// credential (mq.NodeAccessKey, acl.Sealer.NodeSecret) may do anything: it
// comes from a node of this group, which checked its own caller. nodeOnly
// calls (node-to-node methods) take only the node credential. The mode
// applies as in Check; from is the caller's address.
func (a *Authorizer) CheckCall(cred, method string, needs []Need, nodeOnly bool, from string) error {
	_, err := a.checkCall(cred, method, needs, nodeOnly, from)
	return err
}

// Caller is who opened a stream, as its credential was verified then.
type Caller struct {
	accessKey string
	node      bool   // the group's node credential
	sealed    []byte // the user's sealed secret when the stream opened
}

// OpenStream checks the credential of a stream as CheckCall checks a call,
// without needs, and returns its caller, whose calls on the stream
// CheckStreamed checks as they arrive (nil when the mode is disabled, or
// permissive and the credential refused).
func (a *Authorizer) OpenStream(cred, method string, from string) (*Caller, error) {
	return a.checkCall(cred, method, nil, false, from)
}

// CheckStreamed checks a call of method that arrived on a stream c opened:
// its user must still exist with the secret it had then, and hold every
// need now. The mode applies as in CheckCall.
func (a *Authorizer) CheckStreamed(c *Caller, method string, needs []Need, from string) error {
	if a == nil || a.mode == acl.Disabled {
		return nil
	}
	if c == nil { // a permissive node let the stream open without a valid credential
		return a.report(&Denied{ReasonNoCredentials, method + " on a stream opened without valid credentials"}, method, from, "")
	}
	if c.node {
		return nil
	}
	u, ok := a.users.User(c.accessKey)
	if !ok || !bytes.Equal(u.Secret, c.sealed) {
		return a.report(&Denied{ReasonUnknownUser, fmt.Sprintf("access key %s was removed or given a new secret after this stream opened: open a new stream", c.accessKey)},
			method, from, c.accessKey)
	}
	return a.report(lacking(u, needs), method, from, c.accessKey)
}

// checkCall is CheckCall; it also returns the caller it verified.
func (a *Authorizer) checkCall(cred, method string, needs []Need, nodeOnly bool, from string) (*Caller, error) {
	if a == nil || a.mode == acl.Disabled {
		return nil, nil
	}
	if cred == "" {
		return nil, a.report(&Denied{ReasonNoCredentials, fmt.Sprintf("%s without credentials (--access-key and --secret-key-file, or RAFTMQ_ACCESS_KEY and RAFTMQ_SECRET_KEY): this node requires authentication", method)},
			method, from, "")
	}
	c, err := mq.ParseCallCredential(cred)
	if err != nil {
		host := acl.AddrHost(from)
		a.throttle.Take(host, a.now())
		return nil, a.report(&Denied{ReasonBadSignature, fmt.Sprintf("%s: %v", method, err)}, method, from, "")
	}
	verify := func(secret []byte) *Denied {
		if !c.Verify(secret, method) {
			return badSignature(c.AccessKey)
		}
		if now := a.now(); !c.Fresh(now) {
			return &Denied{ReasonStale, fmt.Sprintf("access key %s: credential made at %s, more than %s from this node's clock (%s): check the caller's clock",
				c.AccessKey, time.UnixMilli(c.UnixMilli).UTC().Format(time.RFC3339), mq.CallWindow, now.UTC().Format(time.RFC3339))}
		}
		return nil
	}
	if c.AccessKey == mq.NodeAccessKey {
		d := a.checkNode(verify)
		return verified(d, &Caller{accessKey: c.AccessKey, node: true}), a.report(d, method, from, c.AccessKey)
	}
	if nodeOnly {
		return nil, a.report(&Denied{ReasonNotNode, fmt.Sprintf("%s is a node-to-node call: it needs this group's node credential (the nodes sign with their --auth-key-file) or a client certificate signed by the cluster CA", method)},
			method, from, c.AccessKey)
	}
	u, d := a.check(c.AccessKey, true, needs, from, verify)
	return verified(d, &Caller{accessKey: c.AccessKey, sealed: u.Secret}), a.report(d, method, from, c.AccessKey)
}

// verified is c unless d refused it.
func verified(d *Denied, c *Caller) *Caller {
	if d != nil {
		return nil
	}
	return c
}

// checkNode verifies a call signed with the node credential. The throttle
// does not apply: the node secret is 256 bits from the key file, which no
// guessing finds, and a client that guesses user secrets from a node's
// host must not slow the node's own calls.
func (a *Authorizer) checkNode(verify func([]byte) *Denied) *Denied {
	secret := a.sealer.NodeSecret()
	if len(secret) == 0 {
		return &Denied{ReasonSecretUnreadable, "node credential: this node has no --auth-key-file"}
	}
	if d := verify(secret); d != nil {
		if d.Reason == ReasonBadSignature {
			d.Message = "node credential does not verify: the calling node's --auth-key-file differs from this node's"
		}
		return d
	}
	return nil
}

func throttled(host string, wait time.Duration) *Denied {
	return &Denied{ReasonThrottled, fmt.Sprintf("too many bad signatures from %s: its requests are refused unchecked for %s", host, wait.Round(time.Millisecond))}
}

// May reports whether user, already authenticated by its caller, holds
// every need; always true unless the mode is enforcing (what the user would
// be let do). It counts and logs nothing: a page asks it to show what its
// user may change, and the change itself is checked by CheckCall.
func (a *Authorizer) May(user string, needs ...Need) bool {
	if a == nil || a.mode != acl.Enforcing {
		return true
	}
	u, ok := a.users.User(user)
	if !ok {
		return false
	}
	for _, n := range needs {
		if !Allowed(u.Grants, n) {
			return false
		}
	}
	return true
}
