package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/tlsconf"
)

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// reported is the error of a command that has printed what went wrong
// itself: main only exits with its code.
type reported struct{ code int }

func (r reported) Error() string { return fmt.Sprintf("exit status %d", r.code) }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var r reported
	if errors.As(err, &r) {
		return r.code
	}
	return 1
}

// Run runs the CLI with args (args[0] is the program name).
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	defaultServers = builtinServers
	currentContext = loadCurrent(func(msg string) { fmt.Fprintln(stderr, "raftmq: contexts:", msg) })
	if currentContext.Servers != "" {
		defaultServers = currentContext.Servers
	}
	app := &cli.App{
		Name:  "raftmq",
		Usage: "a RocketMQ-style message broker whose broker group is one Raft cluster",
		Description: "Environment: RAFTMQ_SERVERS, RAFTMQ_TIMEOUT, RAFTMQ_NAMESRV and RAFTMQ_TLS_CA (_CERT, _KEY,\n" +
			"_SERVER_NAME) set -s, --timeout, --namesrv and --tls-* of every command; the server's flags read\n" +
			"RAFTMQ_SERVER_<FLAG> (RAFTMQ_SERVER_DATA for --data, RAFTMQ_SERVER_TLS_CA for its --tls-ca), the name\n" +
			"server's RAFTMQ_NAMESRV_<FLAG>. RAFTMQ_ACCESS_KEY with RAFTMQ_SECRET_KEY_FILE (or the secret in\n" +
			"RAFTMQ_SECRET_KEY) sign every command's calls. Other flags have no variable.\n" +
			"Start with `raftmq demo` to watch a three-node group survive the loss of its leader.",
		Reader:                 stdin,
		Writer:                 stdout,
		ErrWriter:              stderr,
		HideHelpCommand:        true,
		Suggest:                true,
		EnableBashCompletion:   true,
		UseShortOptionHandling: true,
		ExitErrHandler:         func(*cli.Context, error) {}, // Run returns errors; main prints them
		Version:                versionLine(),
		OnUsageError:           onUsageError,
		Action:                 unknownCommand,
		Commands:               commands(),
	}
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintln(c.App.Writer, versionLine()) }
	cli.FlagStringer = flagString
	return app.RunContext(ctx, interspersed(app.Commands, helpArgs(app.Commands, args)))
}

// commands are raftmq's commands, each with its variables (addEnv), its
// usage errors (withUsage) and both spellings of its output choice
// (withFormat).
func commands() []*cli.Command {
	cmds := []*cli.Command{
		serverCommand(),
		namesrvCommand(),
		clusterCommand(),
		healthCommand(),
		statusCommand(),
		topicCommand(),
		produceCommand(),
		consumeCommand(),
		leaderCommand(),
		memberCommand(),
		groupCommand(),
		userCommand(),
		aclCommand(),
		messageCommand(),
		dlqCommand(),
		txnCommand(),
		demoCommand(),
		devCommand(),
		contextCommand(),
		secureCommand(),
		benchCommand(),
		versionCommand(),
		completionCommand(),
	}
	for _, c := range cmds {
		addGroupFlags(c)
		addEnv(c, envPrefix[c.Name])
		withUsage(c)
		withFormat(c)
	}
	return cmds
}

// interspersed moves flags that follow positional arguments in front of
// them, so `raftmq topic create orders --queues 4` works: urfave/cli stops
// parsing flags at the first positional argument.
func interspersed(cmds []*cli.Command, args []string) []string {
	if len(args) < 2 {
		return args
	}
	out := []string{args[0]}
	rest := args[1:]
	var leaf *cli.Command
	for len(rest) > 0 {
		var next *cli.Command
		for _, c := range cmds {
			if c.HasName(rest[0]) {
				next = c
			}
		}
		if next == nil {
			break
		}
		leaf, cmds = next, next.Subcommands
		out = append(out, rest[0])
		rest = rest[1:]
	}
	if leaf == nil {
		return args
	}
	var flags, pos []string
	for i := 0; i < len(rest); i++ {
		a := rest[i]
		if a == "--" {
			pos = append(pos, rest[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		for _, f := range leaf.Flags {
			for _, n := range f.Names() {
				if n != name {
					continue
				}
				if _, isBool := f.(*cli.BoolFlag); !isBool && i+1 < len(rest) {
					i++
					flags = append(flags, rest[i])
				}
			}
		}
	}
	return append(append(out, flags...), pos...)
}

// defaultFlagString is urfave/cli's rendering of a flag in help.
var defaultFlagString = cli.FlagStringer

// repeated is urfave/cli's "[ --property value, -p value ]" after a
// repeatable flag, which says it twice.
var repeated = regexp.MustCompile(` \[ -[^\]]*\]`)

// flagString renders a flag in help as urfave/cli does, without the
// repetition of a repeatable flag's names (its usage says "repeatable").
func flagString(f cli.Flag) string {
	return repeated.ReplaceAllString(defaultFlagString(f), "")
}

// sharedEnv are the flags that mean the same to every command that has
// them (where the group or its name servers are, how long to try): they
// read RAFTMQ_<FLAG> everywhere.
var sharedEnv = map[string]bool{"servers": true, "timeout": true, "namesrv": true, "group-id": true,
	"tls-ca": true, "tls-cert": true, "tls-key": true, "tls-server-name": true,
	"access-key": true, "secret-key-file": true}

// envPrefix scopes the variables of the long-running commands' flags, so
// that one meant for another command (RAFTMQ_GROUP for consume) never
// changes a restarted server.
var envPrefix = map[string]string{"server": "RAFTMQ_SERVER_", "namesrv": "RAFTMQ_NAMESRV_"}

// addEnv gives the flags of c and its subcommands their variables: a shared
// flag RAFTMQ_<FLAG>, a flag of the server or the name server
// RAFTMQ_SERVER_<FLAG> or RAFTMQ_NAMESRV_<FLAG>; a flag that names its own
// variables keeps just those, and the other commands' flags have none.
func addEnv(c *cli.Command, prefix string) {
	for _, f := range c.Flags {
		flag := strings.ToUpper(strings.ReplaceAll(f.Names()[0], "-", "_"))
		var name string
		switch {
		case sharedEnv[f.Names()[0]]:
			name = "RAFTMQ_" + flag
		case prefix != "":
			name = prefix + flag
		default:
			continue
		}
		switch fl := f.(type) {
		case *cli.StringFlag:
			fl.EnvVars = envOr(fl.EnvVars, name)
		case *cli.IntFlag:
			fl.EnvVars = envOr(fl.EnvVars, name)
		case *cli.Int64Flag:
			fl.EnvVars = envOr(fl.EnvVars, name)
		case *cli.UintFlag:
			fl.EnvVars = envOr(fl.EnvVars, name)
		case *cli.Uint64Flag:
			fl.EnvVars = envOr(fl.EnvVars, name)
		case *cli.Float64Flag:
			fl.EnvVars = envOr(fl.EnvVars, name)
		case *cli.BoolFlag:
			fl.EnvVars = envOr(fl.EnvVars, name)
		case *cli.DurationFlag:
			fl.EnvVars = envOr(fl.EnvVars, name)
		case *cli.StringSliceFlag:
			fl.EnvVars = envOr(fl.EnvVars, name)
		}
	}
	for _, sc := range c.Subcommands {
		addEnv(sc, "") // namesrv's subcommands are clients
	}
}

func envOr(own []string, name string) []string {
	if len(own) > 0 {
		return own
	}
	return []string{name}
}

// clientFlags returns fresh -s and --timeout flags (each command needs its
// own flag values) followed by extra.
func clientFlags(extra ...cli.Flag) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "servers", Aliases: []string{"s"}, Value: defaultServers,
			Usage: "comma list of client API addresses of any nodes of the group"},
		&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second,
			Usage: "give up on a request (after retries across leader changes) after this long"},
		&cli.StringFlag{Name: "group-id",
			Usage: "the `ID` of the group meant, as raftmq status shows it: a node of another group at one of the addresses refuses the calls (default: the first group that answers)"},
	}, append(clientTLSFlags(), extra...)...)
}

// clientTLSFlags are how a client command speaks TLS to a group with
// --tls-mode permissive or enforcing (docs/security.md).
func clientTLSFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "tls-ca", Usage: "PEM CA that signed the nodes' certificates: connect with TLS (empty: plaintext)"},
		&cli.StringFlag{Name: "tls-cert", Usage: "PEM client certificate, presented when a node asks (optional; with --tls-key)"},
		&cli.StringFlag{Name: "tls-key", Usage: "PEM key of --tls-cert"},
		&cli.StringFlag{Name: "tls-server-name", Usage: "host name the nodes' certificates must name (default: the host of each -s address)"},
		&cli.StringFlag{Name: "access-key", Usage: "user to sign calls as, for a group with --auth (default: the current context's)"},
		&cli.StringFlag{Name: "secret-key-file", Usage: "file holding --access-key's secret key (- : standard input; or the secret itself in RAFTMQ_SECRET_KEY)"},
	}
}

// clientCredentials are the credentials of a client command: --access-key
// (RAFTMQ_ACCESS_KEY) with --secret-key-file (RAFTMQ_SECRET_KEY_FILE) or
// the secret in RAFTMQ_SECRET_KEY, else the current context's; nil: none.
func clientCredentials(c *cli.Context) (*client.Credentials, error) {
	ak, file := c.String("access-key"), c.String("secret-key-file")
	if ak == "" {
		if file != "" {
			return nil, usageError(c, "--secret-key-file needs --access-key (or RAFTMQ_ACCESS_KEY)")
		}
		if currentContext.AccessKey == "" {
			return nil, nil
		}
		ak, file = currentContext.AccessKey, currentContext.SecretKeyFile
	}
	if file == "" {
		if s := os.Getenv("RAFTMQ_SECRET_KEY"); s != "" {
			return &client.Credentials{AccessKey: ak, SecretKey: []byte(s)}, nil
		}
		return nil, usageError(c, "--access-key %s needs --secret-key-file FILE (or RAFTMQ_SECRET_KEY)", ak)
	}
	secret, err := client.ReadSecretFile(file)
	if err != nil {
		return nil, err
	}
	return &client.Credentials{AccessKey: ak, SecretKey: secret}, nil
}

// clientTLS is the TLS of a client command's flags; nil: plaintext.
func clientTLS(c *cli.Context) (*tls.Config, error) {
	return tlsconf.ClientFiles(c.String("tls-ca"), c.String("tls-cert"), c.String("tls-key"), c.String("tls-server-name"))
}

func jsonFlag() cli.Flag { return &cli.BoolFlag{Name: "json", Usage: "print JSON for machines"} }

// unreachableGiveUp is how long every address of -s may refuse before a
// command gives up (client.Config.GiveUpUnreachable).
const unreachableGiveUp = 3 * time.Second

func newClient(c *cli.Context) (*client.Client, error) {
	cfg := client.DefaultConfig()
	var err error
	if cfg.Servers, err = groupServers(c); err != nil {
		return nil, err
	}
	cfg.RetryTimeout = c.Duration("timeout")
	cfg.GroupID = c.String("group-id")
	// A command pointed at a wrong or dead address says so after a moment
	// and stops once every address has refused for a while; a consumer that
	// follows the topic keeps waiting, as it would through a group restart.
	if !c.Bool("follow") {
		cfg.GiveUpUnreachable = unreachableGiveUp
	}
	errw := c.App.ErrWriter
	cfg.OnWaiting = func(msg string) { fmt.Fprintln(errw, "raftmq:", msg) }
	if cfg.TLS, err = clientTLS(c); err != nil {
		return nil, err
	}
	if cfg.Credentials, err = clientCredentials(c); err != nil {
		return nil, err
	}
	return client.New(cfg)
}

// opCtx bounds one CLI operation by --timeout.
func opCtx(c *cli.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Context, c.Duration("timeout"))
}

// clean turns gRPC errors into their message only.
func clean(err error) error {
	if err == nil {
		return nil
	}
	if s, ok := status.FromError(err); ok {
		return errors.New(s.Message())
	}
	return err
}
