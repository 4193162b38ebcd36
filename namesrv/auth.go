package namesrv

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/remoting"
)

// ExtSignedAt is the time (Unix milliseconds) a node signed a request with
// the node credential: inside the signed content, so a recorded
// registration is refused once it is older than mq.CallWindow.
const ExtSignedAt = "raftmqSignedAt"

// SignNodeRequest signs req with the node credential (access key
// mq.NodeAccessKey, the secret acl.Sealer.NodeSecret derives from the auth
// key file) at now, as nodes sign their registrations and their questions
// to the name server.
func SignNodeRequest(req *remoting.Command, nodeSecret []byte, now time.Time) {
	if req.Ext == nil {
		req.Ext = map[string]string{}
	}
	req.Ext[ExtSignedAt] = strconv.FormatInt(now.UnixMilli(), 10)
	acl.SignRequest(req.Ext, req.Body, mq.NodeAccessKey, nodeSecret)
}

// User is a user of a group as its nodes register it: the name and the
// secret sealed under the group's auth key, never the secret itself.
type User struct {
	Name   string `json:"name"`
	Sealed []byte `json:"sealed"`
}

// Reasons of a refusal, the label of raftmq_namesrv_auth_refusals_total;
// the same words as the nodes' raftmq_auth_refusals_total.
const (
	ReasonNoCredentials    = "no_credentials"
	ReasonUnknownUser      = "unknown_user"
	ReasonBadSignature     = "bad_signature"
	ReasonSecretUnreadable = "secret_unreadable"
	ReasonStale            = "stale"
	ReasonNotNode          = "not_node"
	ReasonThrottled        = "throttled"
)

// denied is a refusal: reason for metrics and logs, msg for the client.
type denied struct{ reason, msg string }

// guard authenticates the name server's requests: registrations need the
// node credential; every other request a user's signature (the users the
// nodes registered) or the node credential.
type guard struct {
	mode     acl.Mode
	sealer   *acl.Sealer
	throttle *acl.Throttle
	log      hclog.Logger
	refusals *prometheus.CounterVec
	now      func() time.Time

	mu      sync.Mutex
	secrets map[string][]byte // user NUL sealed -> secret, so a request opens no AEAD
}

const maxCachedSecrets = 4096

func newGuard(cfg Config, log hclog.Logger) *guard {
	g := &guard{mode: cfg.Auth, sealer: cfg.Sealer, throttle: acl.NewThrottle(cfg.Throttle), log: log, now: time.Now, secrets: map[string][]byte{}}
	g.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_namesrv_auth_refusals_total",
		Help: "Requests refused (mode enforcing) or that enforcing would refuse (mode permissive), by reason: no_credentials, unknown_user, bad_signature, secret_unreadable, stale, not_node, throttled."},
		[]string{"mode", "reason"})
	return g
}

func (g *guard) collectors() []prometheus.Collector {
	return []prometheus.Collector{g.refusals, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_namesrv_auth_throttled_addresses",
		Help: "Client addresses whose bad signatures have used up their allowance: their requests are refused unchecked until it refills."},
		func() float64 { return float64(g.throttle.EmptyCount(g.now())) })}
}

// registration authenticates REGISTER_BROKER or UNREGISTER_BROKER: only
// the node credential, fresh, is taken. The throttle does not apply: the
// node secret is 256 bits from the key file, which no guessing finds, and
// a client that guesses user secrets from a node's host must not keep the
// node's registrations out.
func (g *guard) registration(req *remoting.Command) *denied {
	ak, sig := req.Ext[acl.FieldAccessKey], req.Ext[acl.FieldSignature]
	switch {
	case ak == "" || sig == "":
		return &denied{ReasonNoCredentials, fmt.Sprintf("%s without the node credential: this name server requires registrations signed with the nodes' --auth-key-file", remoting.DescribeCode(req.Code))}
	case ak != mq.NodeAccessKey:
		return &denied{ReasonNotNode, fmt.Sprintf("%s signed by access key %s: registrations need the node credential (the nodes sign with their --auth-key-file)", remoting.DescribeCode(req.Code), ak)}
	}
	return g.node(req)
}

// node verifies a request signed with the node credential.
func (g *guard) node(req *remoting.Command) *denied {
	if !acl.VerifySignature(req.Ext, req.Body, g.sealer.NodeSecret()) {
		return &denied{ReasonBadSignature, "node credential does not verify: the node's --auth-key-file differs from this name server's"}
	}
	ms, err := strconv.ParseInt(req.Ext[ExtSignedAt], 10, 64)
	if err != nil {
		return &denied{ReasonStale, fmt.Sprintf("node credential without a valid %s", ExtSignedAt)}
	}
	now := g.now()
	if d := now.UnixMilli() - ms; d > mq.CallWindow.Milliseconds() || d < -mq.CallWindow.Milliseconds() {
		return &denied{ReasonStale, fmt.Sprintf("node credential made at %s, more than %s from this name server's clock (%s): check the node's clock",
			time.UnixMilli(ms).UTC().Format(time.RFC3339), mq.CallWindow, now.UTC().Format(time.RFC3339))}
	}
	return nil
}

// client authenticates any other request: the node credential, or the
// signature of a user some live registration carries (sealed: the sealed
// secrets of that user name, from every group that has one).
func (g *guard) client(req *remoting.Command, from string, sealed func(user string) [][]byte) *denied {
	ak, sig := req.Ext[acl.FieldAccessKey], req.Ext[acl.FieldSignature]
	if ak == "" || sig == "" {
		return &denied{ReasonNoCredentials, "request without credentials (a RocketMQ client's AccessKey and Signature; raftmq's --access-key and --secret-key-file, or RAFTMQ_ACCESS_KEY and RAFTMQ_SECRET_KEY): this name server requires authentication"}
	}
	if ak == mq.NodeAccessKey {
		return g.node(req)
	}
	host := acl.AddrHost(from)
	now := g.now()
	if wait, slowed := g.throttle.Slowed(host, now); slowed {
		return &denied{ReasonThrottled, fmt.Sprintf("too many bad signatures from %s: its requests are refused unchecked for %s", host, wait.Round(time.Millisecond))}
	}
	bad := fmt.Sprintf("access key %s: unknown, or the signature does not verify", ak)
	secrets := sealed(ak)
	if len(secrets) == 0 {
		g.throttle.Take(host, now)
		return &denied{ReasonUnknownUser, bad}
	}
	readable := false
	for _, s := range secrets {
		secret, err := g.open(ak, s)
		if err != nil {
			continue
		}
		readable = true
		if acl.VerifySignature(req.Ext, req.Body, secret) {
			return nil
		}
	}
	if !readable {
		return &denied{ReasonSecretUnreadable, fmt.Sprintf("access key %s: this name server cannot read its secret (its --auth-key-file differs from the nodes'?)", ak)}
	}
	g.throttle.Take(host, now)
	return &denied{ReasonBadSignature, bad}
}

func (g *guard) open(user string, sealed []byte) ([]byte, error) {
	key := user + "\x00" + string(sealed)
	g.mu.Lock()
	s, ok := g.secrets[key]
	g.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := g.sealer.Open(user, sealed)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	if len(g.secrets) >= maxCachedSecrets {
		clear(g.secrets)
	}
	g.secrets[key] = s
	g.mu.Unlock()
	return s, nil
}

// report counts a refusal, logs it (without secrets: the access key and
// the reason) and says whether the mode refuses the request.
func (g *guard) report(d *denied, req *remoting.Command, from string) bool {
	if d == nil {
		return false
	}
	g.refusals.WithLabelValues(g.mode.String(), d.reason).Inc()
	what, ak := remoting.DescribeCode(req.Code), req.Ext[acl.FieldAccessKey]
	if g.mode == acl.Permissive {
		g.log.Info("auth would refuse (permissive)", "request", what, "from", from, "access_key", ak, "reason", d.reason, "refusal", d.msg)
		return false
	}
	g.log.Debug("auth refused", "request", what, "from", from, "access_key", ak, "reason", d.reason, "refusal", d.msg)
	return true
}
