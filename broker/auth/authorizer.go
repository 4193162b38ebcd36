package auth

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/raftmq/raftmq/store"
)

// Mode says what the Authorizer does with a request it would refuse.
type Mode int

// Modes, RocketMQ-style names as --tls-mode has them.
const (
	// Disabled: nothing is checked (the default).
	Disabled Mode = iota
	// Permissive: every request is served; what enforcing would refuse is
	// logged and counted.
	Permissive
	// Enforcing: requests without a valid signature of a known user, or
	// without the permission they need, are refused.
	Enforcing
)

// ParseMode reads disabled, permissive or enforcing.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "disabled":
		return Disabled, nil
	case "permissive":
		return Permissive, nil
	case "enforcing":
		return Enforcing, nil
	}
	return Disabled, fmt.Errorf("auth mode %q: want disabled, permissive or enforcing", s)
}

func (m Mode) String() string {
	switch m {
	case Permissive:
		return "permissive"
	case Enforcing:
		return "enforcing"
	}
	return "disabled"
}

// Reasons of a refusal, the label of raftmq_auth_refusals_total.
const (
	ReasonNoCredentials    = "no_credentials"    // no AccessKey or no Signature
	ReasonUnknownUser      = "unknown_user"      // no user of that access key
	ReasonBadSignature     = "bad_signature"     // the signature is not the user's secret's
	ReasonSecretUnreadable = "secret_unreadable" // the user's sealed secret does not open with this node's key
	ReasonNoPermission     = "no_permission"     // a verified user without a grant the request needs
)

// Denied is a refusal: Reason for metrics and logs, Message for the client.
type Denied struct {
	Reason  string
	Message string
}

func (d *Denied) Error() string { return d.Message }

// Directory is the user table the Authorizer reads (store.Store, on this
// node).
type Directory interface {
	User(name string) (store.User, bool)
}

var _ Directory = (*store.Store)(nil)

// Config of an Authorizer.
type Config struct {
	Mode   Mode
	Users  Directory
	Sealer *Sealer // required unless Mode is Disabled
	Logger hclog.Logger
	// Registerer takes raftmq_auth_refusals_total (nil: not registered).
	Registerer prometheus.Registerer
}

// Authorizer verifies requests' signatures against the user table and
// checks their permissions. It is safe for concurrent use.
type Authorizer struct {
	mode     Mode
	users    Directory
	sealer   *Sealer
	log      hclog.Logger
	refusals *prometheus.CounterVec

	mu      sync.Mutex
	secrets map[string][]byte // user NUL sealed -> secret, so a request opens no AEAD
}

const maxCachedSecrets = 4096

// New returns an Authorizer.
func New(cfg Config) (*Authorizer, error) {
	if cfg.Mode != Disabled && (cfg.Users == nil || cfg.Sealer == nil) {
		return nil, errors.New("auth: a user table and an auth key are needed unless auth is disabled")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	a := &Authorizer{mode: cfg.Mode, users: cfg.Users, sealer: cfg.Sealer, log: cfg.Logger, secrets: map[string][]byte{}}
	a.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "raftmq_auth_refusals_total",
		Help: "Requests refused (mode enforcing) or that enforcing would refuse (mode permissive), by reason: no_credentials, unknown_user, bad_signature, secret_unreadable, no_permission."},
		[]string{"mode", "reason"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(a.refusals); err != nil {
			return nil, fmt.Errorf("auth metrics: %w", err)
		}
	}
	return a, nil
}

// Mode returns the mode.
func (a *Authorizer) Mode() Mode {
	if a == nil {
		return Disabled
	}
	return a.mode
}

// Refusals returns the counter of refusals of mode and reason (tests).
func (a *Authorizer) Refusals(mode Mode, reason string) prometheus.Counter {
	return a.refusals.WithLabelValues(mode.String(), reason)
}

// Check authenticates a request from its ext fields and body and checks
// that its user holds every need. It returns nil when the request may be
// served (always, unless the mode is Enforcing) and a *Denied otherwise.
// what names the request in logs; from is the client's address.
func (a *Authorizer) Check(ext map[string]string, body []byte, needs []Need, what, from string) error {
	if a == nil || a.mode == Disabled {
		return nil
	}
	d := a.check(ext, body, needs)
	if d == nil {
		return nil
	}
	a.refusals.WithLabelValues(a.mode.String(), d.Reason).Inc()
	if a.mode == Permissive {
		a.log.Info("auth would refuse (permissive)", "request", what, "from", from, "access_key", ext[FieldAccessKey], "reason", d.Reason, "refusal", d.Message)
		return nil
	}
	a.log.Debug("auth refused", "request", what, "from", from, "access_key", ext[FieldAccessKey], "reason", d.Reason, "refusal", d.Message)
	return d
}

func (a *Authorizer) check(ext map[string]string, body []byte, needs []Need) *Denied {
	ak, sig := ext[FieldAccessKey], ext[FieldSignature]
	if ak == "" || sig == "" {
		return &Denied{ReasonNoCredentials, "request without credentials (AccessKey and Signature): this broker requires authentication"}
	}
	bad := fmt.Sprintf("access key %s: unknown, or the signature does not verify", ak)
	u, ok := a.users.User(ak)
	if !ok {
		return &Denied{ReasonUnknownUser, bad}
	}
	secret, err := a.secret(u)
	if err != nil {
		return &Denied{ReasonSecretUnreadable, fmt.Sprintf("access key %s: this node cannot read its secret (auth key files differ between nodes?)", ak)}
	}
	if !VerifySignature(ext, body, secret) {
		return &Denied{ReasonBadSignature, bad}
	}
	var missing []string
	for _, n := range needs {
		if !Allowed(u.Grants, n) {
			missing = append(missing, n.describe())
		}
	}
	if len(missing) > 0 {
		return &Denied{ReasonNoPermission, fmt.Sprintf("user %s may not %s", ak, strings.Join(missing, ", nor "))}
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
