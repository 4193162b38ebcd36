package auth

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/store"
)

// Reasons of a refusal, the label of raftmq_auth_refusals_total.
const (
	ReasonNoCredentials    = "no_credentials"    // no AccessKey or no Signature
	ReasonUnknownUser      = "unknown_user"      // no user of that access key
	ReasonCatchingUp       = "catching_up"       // no user of that access key on a node not caught up with the group since it started: retry
	ReasonBadSignature     = "bad_signature"     // the signature is not the user's secret's
	ReasonSecretUnreadable = "secret_unreadable" // the user's sealed secret does not open with this node's key
	ReasonNoPermission     = "no_permission"     // a verified user without a grant the request needs
	ReasonStale            = "stale"             // a gRPC call credential made outside the replay window
	ReasonNotNode          = "not_node"          // a node-to-node call without the group's node credential
	ReasonThrottled        = "throttled"         // refused unchecked: too many bad signatures from the address
)

// Denied is a refusal: Reason for metrics and logs, Message for the client.
type Denied struct {
	Reason  string
	Message string
}

func (d *Denied) Error() string { return d.Message }

// Retryable reports whether the same request may pass a moment later on
// this node or at once on another (ReasonCatchingUp).
func (d *Denied) Retryable() bool { return d.Reason == ReasonCatchingUp }

// Directory is the user table the Authorizer reads (store.Store, on this
// node).
type Directory interface {
	User(name string) (store.User, bool)
}

var _ Directory = (*store.Store)(nil)

// Config of an Authorizer.
type Config struct {
	Mode   acl.Mode
	Users  Directory
	Sealer *acl.Sealer // required unless Mode is acl.Disabled
	Logger hclog.Logger
	// Registerer takes raftmq_auth_refusals_total and
	// raftmq_auth_throttled_addresses (nil: not registered).
	Registerer prometheus.Registerer
	// Throttle bounds bad signatures per client address; its zero value
	// is acl.DefaultThrottle.
	Throttle acl.ThrottleConfig
	// CaughtUp reports whether the node has applied the group's log up to
	// what a leader committed since the node started (nil: always). Until
	// it has, an unknown access key may be a user this node has not
	// applied yet: the refusal says to retry (ReasonCatchingUp).
	CaughtUp func() bool
}

// Authorizer verifies requests' signatures against the user table and
// checks their permissions. It is safe for concurrent use.
type Authorizer struct {
	mode     acl.Mode
	users    Directory
	sealer   *acl.Sealer
	log      hclog.Logger
	refusals *prometheus.CounterVec

	mu      sync.Mutex
	secrets map[string][]byte // user NUL sealed -> secret, so a request opens no AEAD

	throttle *acl.Throttle // bad signatures per address
	now      func() time.Time
	caughtUp func() bool
}

const maxCachedSecrets = 4096

// New returns an Authorizer.
func New(cfg Config) (*Authorizer, error) {
	if cfg.Mode != acl.Disabled && (cfg.Users == nil || cfg.Sealer == nil) {
		return nil, errors.New("auth: a user table and an auth key are needed unless auth is disabled")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	a := &Authorizer{mode: cfg.Mode, users: cfg.Users, sealer: cfg.Sealer, log: cfg.Logger, secrets: map[string][]byte{},
		throttle: acl.NewThrottle(cfg.Throttle), now: time.Now, caughtUp: cfg.CaughtUp}
	a.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_auth_refusals_total",
		Help: "Requests refused (mode enforcing) or that enforcing would refuse (mode permissive), by reason: no_credentials, unknown_user, catching_up, bad_signature, secret_unreadable, no_permission, stale, not_node, throttled."},
		[]string{"mode", "reason"})
	slowed := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_auth_throttled_addresses",
		Help: "Client addresses whose bad signatures have used up their allowance: their requests are refused unchecked until it refills."},
		func() float64 { return float64(a.throttle.EmptyCount(a.now())) })
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{a.refusals, slowed} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("auth metrics: %w", err)
			}
		}
	}
	return a, nil
}

// Mode returns the mode.
func (a *Authorizer) Mode() acl.Mode {
	if a == nil {
		return acl.Disabled
	}
	return a.mode
}

// Refusals returns the counter of refusals of mode and reason (tests).
func (a *Authorizer) Refusals(mode acl.Mode, reason string) prometheus.Counter {
	return a.refusals.WithLabelValues(mode.String(), reason)
}

// Check authenticates a RocketMQ remoting request from its ext fields and
// body and checks that its user holds every need. It returns nil when the
// request may be served (always, unless the mode is Enforcing) and a
// *Denied otherwise. what names the request in logs; from is the client's
// address.
func (a *Authorizer) Check(ext map[string]string, body []byte, needs []Need, what, from string) error {
	if a == nil || a.mode == acl.Disabled {
		return nil
	}
	ak := ext[acl.FieldAccessKey]
	_, d := a.check(ak, ext[acl.FieldSignature] != "", needs, from, func(secret []byte) *Denied {
		if !acl.VerifySignature(ext, body, secret) {
			return badSignature(ak)
		}
		return nil
	})
	return a.report(d, what, from, ak)
}

// report counts and logs a refusal and says whether the mode refuses it.
func (a *Authorizer) report(d *Denied, what, from, ak string) error {
	if d == nil {
		return nil
	}
	a.refusals.WithLabelValues(a.mode.String(), d.Reason).Inc()
	if a.mode == acl.Permissive {
		a.log.Info("auth would refuse (permissive)", "request", what, "from", from, "access_key", ak, "reason", d.Reason, "refusal", d.Message)
		return nil
	}
	a.log.Debug("auth refused", "request", what, "from", from, "access_key", ak, "reason", d.Reason, "refusal", d.Message)
	return d
}

func badSignature(ak string) *Denied {
	return &Denied{ReasonBadSignature, fmt.Sprintf("access key %s: unknown, or the signature does not verify", ak)}
}

// check authenticates access key ak (signed: the request carries a
// signature) with verify, which answers nil when the signature is the
// secret's and a refusal otherwise, and then checks the user's grants; it
// returns the user it verified. A bad signature or an unknown user takes
// from the address's allowance; an address without allowance left is
// refused before anything is verified.
func (a *Authorizer) check(ak string, signed bool, needs []Need, from string, verify func(secret []byte) *Denied) (store.User, *Denied) {
	if ak == "" || !signed {
		return store.User{}, &Denied{ReasonNoCredentials, "request without credentials (AccessKey and Signature): this broker requires authentication"}
	}
	host := acl.AddrHost(from)
	now := a.now()
	if wait, slowed := a.throttle.Slowed(host, now); slowed {
		return store.User{}, throttled(host, wait)
	}
	u, ok := a.users.User(ak)
	if !ok && a.caughtUp != nil && !a.caughtUp() {
		return store.User{}, &Denied{ReasonCatchingUp, fmt.Sprintf("access key %s: not known on this node yet, which is catching up with the group since it started: try again", ak)}
	}
	if !ok {
		a.throttle.Take(host, now)
		return store.User{}, &Denied{ReasonUnknownUser, badSignature(ak).Message}
	}
	secret, err := a.secret(u)
	if err != nil {
		return store.User{}, &Denied{ReasonSecretUnreadable, fmt.Sprintf("access key %s: this node cannot read its secret (auth key files differ between nodes?)", ak)}
	}
	if d := verify(secret); d != nil {
		a.throttle.Take(host, now)
		return store.User{}, d
	}
	return u, lacking(u, needs)
}

// lacking refuses user u unless it holds every need.
func lacking(u store.User, needs []Need) *Denied {
	var missing []string
	for _, n := range needs {
		if !Allowed(u.Grants, n) {
			missing = append(missing, n.describe())
		}
	}
	if len(missing) > 0 {
		return &Denied{ReasonNoPermission, fmt.Sprintf("user %s may not %s", u.Name, strings.Join(missing, ", nor "))}
	}
	return nil
}

func (a *Authorizer) secret(u store.User) ([]byte, error) {
	key := u.Name + "\x00" + string(u.Secret)
	a.mu.Lock()
	s, ok := a.secrets[key]
	a.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := a.sealer.Open(u.Name, u.Secret)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	if len(a.secrets) >= maxCachedSecrets {
		clear(a.secrets)
	}
	a.secrets[key] = s
	a.mu.Unlock()
	return s, nil
}
