package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/internal/tlsconf"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

func namesrvCommand() *cli.Command {
	d := namesrv.DefaultConfig()
	return &cli.Command{
		Name:  "namesrv",
		Usage: "run a RocketMQ-style name server (routes for RocketMQ clients)",
		Description: "Nodes started with --remoting and --namesrv register with every name server they are given;\n" +
			"RocketMQ clients and raftmq's --namesrv ask it for routes. Several name servers are independent.\n" +
			"With --listen-external, clients that connect there (outside the nodes' network: published ports)\n" +
			"are told the nodes' external addresses (server --advertise-external, --remoting-advertise-external),\n" +
			"clients of --listen the addresses the nodes advertise in their network.\n\n" +
			"   raftmq namesrv --listen 127.0.0.1:9876 --http 127.0.0.1:9877",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "listen", Value: d.Listen, Usage: "remoting listen address (RocketMQ's name server port is 9876)"},
			&cli.StringFlag{Name: "listen-external", Usage: "a second remoting listener, for clients outside the nodes' network: its routes name the nodes' external addresses (empty: off)"},
			&cli.StringFlag{Name: "http", Usage: "HTTP address for /metrics and /healthz (empty: off)"},
			&cli.DurationFlag{Name: "expiry", Value: d.Expiry, Usage: "drop a broker node that has not registered for this long"},
			&cli.StringFlag{Name: "auth", Value: "disabled", Usage: "authentication, as the nodes' --auth: disabled; permissive (serve everything, log and count in /metrics what enforcing would refuse); enforcing (registrations need the nodes' credential from --auth-key-file, every other request a signature of a user the nodes registered; refused NO_PERMISSION). docs/security.md"},
			&cli.StringFlag{Name: "tls-mode", EnvVars: []string{"RAFTMQ_NAMESRV_TLS_MODE"}, Value: string(tlsconf.Disabled), Usage: "TLS on the remoting listeners, as the nodes' --tls-mode: disabled; permissive (TLS and plaintext); enforcing (TLS only). Nodes with TLS on register over TLS; RocketMQ clients use it with their TLS setting (WithTls). docs/security.md"},
			&cli.StringFlag{Name: "tls-cert", EnvVars: []string{"RAFTMQ_NAMESRV_TLS_CERT"}, Usage: "PEM certificate of the name server (it must name the host clients and nodes dial); reloaded when the file changes"},
			&cli.StringFlag{Name: "tls-key", EnvVars: []string{"RAFTMQ_NAMESRV_TLS_KEY"}, Usage: "PEM private key of --tls-cert"},
			&cli.StringFlag{Name: "tls-ca", EnvVars: []string{"RAFTMQ_NAMESRV_TLS_CA"}, Usage: "PEM CA of the cluster (verifies client certificates when given)"},
			&cli.DurationFlag{Name: "tls-reload", EnvVars: []string{"RAFTMQ_NAMESRV_TLS_RELOAD"}, Value: tlsconf.DefaultReloadEvery, Usage: "check the TLS files for changes this often (0: never)"},
			&cli.StringFlag{Name: "auth-key-file", Usage: "the nodes' --auth-key-file: verifies their registrations and opens the sealed secrets of the users they register (needed unless --auth disabled)"},
			logLevelFlag(), logFormatFlag(),
		},
		Action: runNamesrv,
		Subcommands: []*cli.Command{{
			Name:  "routes",
			Usage: "show the groups, leaders, followers and topics a name server knows",
			Flags: append([]cli.Flag{
				&cli.StringFlag{Name: "namesrv", Value: "127.0.0.1:9876", Usage: "name servers, ADDR[;ADDR...]: the first that answers is shown"},
				&cli.StringFlag{Name: "topic", Usage: "show this topic's route only"},
				&cli.DurationFlag{Name: "timeout", Value: 5 * time.Second, Usage: "give up after this long"},
				jsonFlag(),
			}, clientTLSFlags()...),
			Action: runRoutes,
		}},
	}
}

func runNamesrv(c *cli.Context) error {
	logger, err := newLogger(c, "namesrv")
	if err != nil {
		return err
	}
	cfg := namesrv.Config{Listen: c.String("listen"), ListenExternal: c.String("listen-external"), HTTP: c.String("http"), Expiry: c.Duration("expiry"), Logger: logger}
	if cfg.Auth, err = acl.ParseMode(c.String("auth")); err != nil {
		return usageError(c, "--auth: %v", err)
	}
	if f := c.String("auth-key-file"); f != "" {
		if cfg.Sealer, err = acl.LoadSealer(f); err != nil {
			return err
		}
	} else if cfg.Auth != acl.Disabled {
		return usageError(c, "--auth %s needs --auth-key-file: the nodes' key file, to verify their registrations and the users' signatures", cfg.Auth)
	}
	mode, err := tlsconf.ParseMode(c.String("tls-mode"))
	if err != nil {
		return usageError(c, "%v", err)
	}
	tc := tlsconf.Config{Mode: mode, CertFile: c.String("tls-cert"), KeyFile: c.String("tls-key"), CAFile: c.String("tls-ca"),
		ReloadEvery: c.Duration("tls-reload"), Logger: logger.Named("tls")}
	if tc.ReloadEvery == 0 {
		tc.ReloadEvery = -1
	}
	if cfg.TLS, err = tlsconf.New(tc); err != nil {
		return err
	}
	defer cfg.TLS.Close()
	s, err := namesrv.Start(cfg)
	if err != nil {
		return err
	}
	<-c.Context.Done()
	return s.Close()
}

// routeGroup is one group in `namesrv routes`.
type routeGroup struct {
	Group     string            `json:"group"`
	Cluster   string            `json:"cluster"`
	Term      uint64            `json:"term"`
	Leader    string            `json:"leader_address"`
	LeaderID  string            `json:"leader_id"`
	Followers map[string]string `json:"followers"` // brokerId -> address
	Nodes     map[string]string `json:"nodes"`     // brokerId -> node id
	Topics    map[string]int    `json:"topics"`
	// WritePaths: the followers routed as write-only pseudo-brokers
	// (name -> address), --remoting-write-via-followers.
	WritePaths map[string]string `json:"write_paths,omitempty"`
	// NoRemoting: the group's nodes serve no RocketMQ port; leader and
	// followers are their client API addresses.
	NoRemoting bool `json:"no_remoting,omitempty"`
}

func runRoutes(c *cli.Context) error {
	cred, err := clientCredentials(c)
	if err != nil {
		return err
	}
	tc, err := clientTLS(c)
	if err != nil {
		return err
	}
	cl := remoting.NewClient()
	defer cl.Close()
	if tc != nil {
		cl.Dial = func(ctx context.Context, addr string) (net.Conn, error) {
			d := tls.Dialer{Config: tc}
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	ctx, cancel := opCtx(c)
	defer cancel()
	addrs := namesrv.SplitAddrs(c.String("namesrv"))
	if len(addrs) == 0 {
		return fmt.Errorf("--namesrv %q: want ADDR[;ADDR...]", c.String("namesrv"))
	}
	var ci *namesrv.ClusterInfo
	var errs []error
	for _, a := range addrs {
		var err error
		var sign func(*remoting.Command)
		if cred != nil {
			sign = func(req *remoting.Command) { acl.SignRequest(req.Ext, req.Body, cred.AccessKey, cred.SecretKey) }
		}
		if ci, err = namesrv.FetchClusterInfo(ctx, cl, a, sign); err == nil {
			break
		}
		errs = append(errs, fmt.Errorf("name server %s: %w", a, err))
	}
	if ci == nil {
		return errors.Join(errs...)
	}
	topic := c.String("topic")
	var out []routeGroup
	names := map[string]bool{}
	for name := range ci.BrokerAddrTable {
		names[name] = true
	}
	for name := range ci.RaftmqGroups {
		names[name] = true // a group without remoting is only here
	}
	for name := range names {
		bd, gi := ci.BrokerAddrTable[name], ci.RaftmqGroups[name]
		if bd.Cluster == "" {
			bd.Cluster = gi.Cluster
		}
		if topic != "" {
			if _, ok := gi.Topics[topic]; !ok {
				continue
			}
		}
		rg := routeGroup{Group: name, Cluster: bd.Cluster, Term: gi.Term, Leader: bd.BrokerAddrs[0], LeaderID: gi.Nodes[0],
			Followers: map[string]string{}, Nodes: map[string]string{}, Topics: gi.Topics, WritePaths: gi.WritePaths}
		for id, addr := range bd.BrokerAddrs {
			rg.Nodes[fmt.Sprint(id)] = gi.Nodes[id]
			if id != 0 {
				rg.Followers[fmt.Sprint(id)] = addr
			}
		}
		if len(bd.BrokerAddrs) == 0 {
			// No remoting port: the client API addresses raftmq's CLI and
			// SDK use.
			rg.Leader, rg.NoRemoting = gi.ClientAddrs[0], true
			for id, addr := range gi.ClientAddrs {
				rg.Nodes[fmt.Sprint(id)] = gi.Nodes[id]
				if id != 0 {
					rg.Followers[fmt.Sprint(id)] = addr
				}
			}
		}
		out = append(out, rg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	if topic != "" && len(out) == 0 {
		return &exitError{code: 3, err: fmt.Errorf("topic %s: no group registered with %s holds it", topic, c.String("namesrv"))}
	}
	w := c.App.Writer
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if out == nil {
			out = []routeGroup{}
		}
		return enc.Encode(out)
	}
	if len(out) == 0 {
		fmt.Fprintln(w, "no groups registered")
		return nil
	}
	for _, g := range out {
		leader := g.Leader
		if leader == "" {
			leader = "(none registered)"
		} else {
			leader += " (" + g.LeaderID + ")"
		}
		note := ""
		if g.NoRemoting {
			note = "  (no RocketMQ port: client API addresses)"
		}
		fmt.Fprintf(w, "group %s  cluster %s  term %d%s\n  leader    0: %s\n", g.Group, g.Cluster, g.Term, note, leader)
		ids := make([]string, 0, len(g.Followers))
		for id := range g.Followers {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			fmt.Fprintf(w, "  follower %2s: %s (%s)\n", id, g.Followers[id], g.Nodes[id])
		}
		paths := make([]string, 0, len(g.WritePaths))
		for name, addr := range g.WritePaths {
			paths = append(paths, name+" "+addr)
		}
		sort.Strings(paths)
		if len(paths) > 0 {
			fmt.Fprintf(w, "  sends also via (write-only brokers): %s\n", strings.Join(paths, ", "))
		}
		topics := make([]string, 0, len(g.Topics))
		for t, q := range g.Topics {
			topics = append(topics, fmt.Sprintf("%s(%d)", t, q))
		}
		sort.Strings(topics)
		fmt.Fprintf(w, "  topics: %s\n", strings.Join(topics, " "))
	}
	return nil
}
