package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/store"
)

// AuthConfig is the node's authentication of RocketMQ remoting requests
// and its permissions (docs/security.md).
type AuthConfig struct {
	Mode acl.Mode
	// KeyFile holds the key material (at least 32 bytes) that seals user
	// secrets in the log and the snapshots; every node of a group needs
	// the same. Key, when set, is used instead (tests).
	KeyFile string
	Key     []byte
	// AdminUser and AdminSecretFile name the first admin: the leader
	// writes it, with admin on the cluster, while the group has no user
	// at all. AdminSecret, when set, is used instead of the file (tests).
	AdminUser       string
	AdminSecretFile string
	AdminSecret     []byte
}

// Validate checks the fields that need no file read.
func (c *AuthConfig) Validate() error {
	if c.Mode != acl.Disabled && c.KeyFile == "" && len(c.Key) == 0 {
		return fmt.Errorf("--auth %s needs --auth-key-file: user secrets are kept sealed with it", c.Mode)
	}
	if (c.AdminUser == "") != (c.AdminSecretFile == "" && len(c.AdminSecret) == 0) {
		return errors.New("--auth-admin-user and --auth-admin-secret-file go together")
	}
	if c.AdminUser != "" {
		if err := store.ValidateUserName(c.AdminUser); err != nil {
			return fmt.Errorf("--auth-admin-user: %w", err)
		}
		if c.KeyFile == "" && len(c.Key) == 0 {
			return errors.New("--auth-admin-user needs --auth-key-file")
		}
	}
	return nil
}

// startAuth builds the node's Authorizer (s.auth, used by the remoting
// adapter) and, with a configured first admin, writes it whenever this
// node leads a group without users.
func (s *Server) startAuth() error {
	c := s.cfg.Auth
	if err := c.Validate(); err != nil {
		return err
	}
	var err error
	switch {
	case len(c.Key) > 0:
		s.sealer, err = acl.NewSealer(c.Key)
	case c.KeyFile != "":
		s.sealer, err = acl.LoadSealer(c.KeyFile)
	}
	if err != nil {
		return err
	}
	s.auth, err = auth.New(auth.Config{Mode: c.Mode, Users: s.store, Sealer: s.sealer, Logger: s.log.Named("auth"), Registerer: s.broker.Registry(),
		CaughtUp: s.broker.CaughtUp})
	if err != nil {
		return err
	}
	s.broker.SetUsers(s.store, s.sealer)
	// With the group's key file a node signs its calls to the other nodes
	// in every mode, so that they pass a node with auth on while a group
	// moves node by node.
	s.peers.SetNodeSecret(s.sealer.NodeSecret())
	if c.AdminUser == "" {
		return nil
	}
	secret := c.AdminSecret
	if len(secret) == 0 {
		b, err := os.ReadFile(c.AdminSecretFile)
		if err != nil {
			return fmt.Errorf("--auth-admin-secret-file: %w", err)
		}
		secret = []byte(strings.TrimRight(string(b), "\r\n"))
	}
	if len(secret) == 0 {
		return errors.New("--auth-admin-secret-file: empty")
	}
	s.authStop = make(chan struct{})
	run := func() {
		s.authMu.Lock()
		defer s.authMu.Unlock()
		if s.authStopped {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.bootstrapAdmin(c.AdminUser, secret)
		}()
	}
	s.authOff = s.node.OnChange(func(ev election.Event) {
		if ev.Role == election.Leader && ev.Ready {
			run()
		}
	})
	// A node that is a ready leader already had its ready event (the
	// bootstrap command is idempotent, so running it twice is harmless).
	if s.node.Ready() {
		run()
	}
	return nil
}

// bootstrapAdmin writes the first admin when the group has no user; the
// command itself changes nothing on a table with users, so two leaders in
// a row cannot both write one.
func (s *Server) bootstrapAdmin(user string, secret []byte) {
	if len(s.store.Users()) > 0 {
		return
	}
	sealed, err := s.sealer.Seal(user, secret)
	if err != nil {
		s.log.Error("auth: first admin not written", "user", user, "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		select {
		case <-s.authStop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := s.store.BootstrapUser(ctx, user, sealed, auth.ClusterResource, uint32(auth.Admin)); err != nil {
		s.log.Warn("auth: first admin not written (the next leader tries again)", "user", user, "error", err)
		return
	}
	s.log.Info("auth: first admin written", "user", user)
}

// stopAuth stops the first admin's bootstrap; it is idempotent.
func (s *Server) stopAuth() {
	if s.authOff == nil {
		return
	}
	s.authOff()
	s.authMu.Lock()
	defer s.authMu.Unlock()
	if !s.authStopped {
		s.authStopped = true
		close(s.authStop)
	}
}

// Authorizer returns the node's Authorizer (mode disabled unless
// configured).
func (s *Server) Authorizer() *auth.Authorizer { return s.auth }

// Sealer returns the node's secret sealer (nil without an auth key).
func (s *Server) Sealer() *acl.Sealer { return s.sealer }

// pprofGuard serves h only to loopback clients when authentication is on
// (permissive or enforcing): profiles show memory, command lines and
// timings, and the HTTP port has no credentials, so they are for an
// operator on the node's own host (ssh -L for a remote one).
func (s *Server) pprofGuard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.auth.Mode() != acl.Disabled {
			host, _, err := net.SplitHostPort(r.RemoteAddr)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				http.Error(w, "/debug/pprof answers only on the node's own host (loopback) while --auth is on", http.StatusForbidden)
				return
			}
		}
		h(w, r)
	}
}
