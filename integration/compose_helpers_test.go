package integration

// Helpers of the docker compose tests (compose_test.go). Everything here is
// prefixed with "compose" so that it cannot clash with the other files of
// package integration.
//
// The tests drive the real artefacts a user gets: the Dockerfile (built FROM
// scratch around a freshly compiled static binary), docker-compose.yml (with a
// unique project name and free published ports, so they never touch a user's
// `make up`) and the raftmq CLI on the host.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/composegroup"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/internal/testbin"
)

const (
	// composeImageDefault is the tag the tests build and run. It is not
	// raftmq:local so that a test run never replaces the image of a user's
	// `make up`; RAFTMQ_IT_IMAGE overrides it.
	composeImageDefault = "raftmq:it"
	// composeCLITimeout bounds one CLI invocation unless a caller says otherwise.
	composeCLITimeout = 60 * time.Second
	// composeWaitTimeout bounds the waits for a leader / healthy group.
	composeWaitTimeout = 120 * time.Second
)

// composeNodes are the services of docker-compose.yml; node ids equal service names.
var composeNodes = []string{"n1", "n2", "n3"}

var (
	composeCmdOnce sync.Once
	composeCmdArgs []string
	composeCmdErr  error
)

// composeCommand returns the compose command prefix that works here
// (composegroup.Command), asked once.
func composeCommand() ([]string, error) {
	composeCmdOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		composeCmdArgs, composeCmdErr = composegroup.Command(ctx)
	})
	return composeCmdArgs, composeCmdErr
}

// composeRequire skips the test unless a docker engine answers and compose
// is installed. -short and RAFTMQ_SKIP_DOCKER_TESTS=1 skip as well: these
// tests start containers and take minutes.
func composeRequire(t *testing.T) {
	t.Helper()
	if os.Getenv("RAFTMQ_SKIP_DOCKER_TESTS") == "1" {
		t.Skip("skipping docker compose test: RAFTMQ_SKIP_DOCKER_TESTS=1")
	}
	if testing.Short() {
		t.Skip("skipping docker compose test in -short mode")
	}
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("skipping docker compose test: no docker CLI in PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, stderr, err := composeExec(ctx, nil, "", nil, "docker", "info"); err != nil {
		t.Skipf("skipping docker compose test: no docker engine answers `docker info`: %v: %s",
			err, composeTail(stderr, 300))
	}
	if _, err := composeCommand(); err != nil {
		t.Skipf("skipping docker compose test: %v", err)
	}
}

// composeRepoRoot is the directory holding go.mod, Dockerfile and docker-compose.yml.
func composeRepoRoot(t *testing.T) string {
	t.Helper()
	root, err := testbin.Root()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func composeRandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// composeFreePorts returns n distinct TCP ports free on 127.0.0.1 right now,
// from below the ephemeral range (localgroup.FreePorts), so no outgoing
// connection takes one before docker publishes it.
func composeFreePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := localgroup.FreePorts(n)
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	return ports
}

func composeTail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// composeExec runs one command with a deadline and returns stdout and stderr.
func composeExec(ctx context.Context, env []string, dir string, stdin []byte, name string, args ...string) ([]byte, []byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	// Do not hang on grandchildren holding the pipes after a kill.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return stdout.Bytes(), stderr.Bytes(), err
}

// composeBuildImage compiles cmd/raftmq statically, builds the image from the
// repository's Dockerfile and .dockerignore, and returns the host CLI path
// and the image tag.
func composeBuildImage(t *testing.T, root string) (cli, image string) {
	t.Helper()
	image = os.Getenv("RAFTMQ_IT_IMAGE")
	if image == "" {
		image = composeImageDefault
	}
	dir := t.TempDir()
	ctxDir := filepath.Join(dir, "context")
	arch := runtime.GOARCH
	if a := os.Getenv("RAFTMQ_IT_GOARCH"); a != "" {
		arch = a
	}
	binRel := "bin/raftmq-linux-" + arch
	for _, d := range []string{"bin/rootfs/data", "bin/rootfs/tmp", "bin/rootfs/secure"} {
		if err := os.MkdirAll(filepath.Join(ctxDir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(ctxDir, "bin/rootfs/tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ctxDir, "bin/rootfs/secure"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Dockerfile", ".dockerignore"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatalf("read %s: %v", f, err)
		}
		if err := os.WriteFile(filepath.Join(ctxDir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	goBuild := func(out, goos, goarch string) {
		start := time.Now()
		if err := testbin.Build(ctx, out, goos, goarch, true); err != nil {
			t.Fatal(err)
		}
		t.Logf("built %s (%s/%s) in %v", filepath.Base(out), goos, goarch, time.Since(start).Round(time.Millisecond))
	}
	if prebuilt := os.Getenv(testbin.EnvBinary); prebuilt != "" {
		// A static linux binary built elsewhere, used for both the image
		// and the host CLI.
		b, err := os.ReadFile(prebuilt)
		if err != nil {
			t.Fatalf("RAFTMQ_IT_BINARY: %v", err)
		}
		if err := os.WriteFile(filepath.Join(ctxDir, binRel), b, 0o755); err != nil {
			t.Fatal(err)
		}
		cli = prebuilt
	} else {
		goBuild(filepath.Join(ctxDir, binRel), "linux", arch)
		cli = filepath.Join(dir, "raftmq")
		// The static linux binary doubles as the host CLI on linux hosts.
		if runtime.GOOS != "linux" || runtime.GOARCH != arch || os.Link(filepath.Join(ctxDir, binRel), cli) != nil {
			goBuild(cli, runtime.GOOS, runtime.GOARCH)
		}
	}

	oldID := composeImageID(image)
	start := time.Now()
	out, stderr, err := composeExec(ctx, nil, ctxDir, nil, "docker", "build",
		"--build-arg", "BINARY="+binRel, "-t", image, ".")
	if err != nil {
		t.Fatalf("docker build: %v\n%s\n%s", err, composeTail(out, 3000), composeTail(stderr, 3000))
	}
	newID := composeImageID(image)
	t.Logf("built image %s (%s) in %v", image, newID, time.Since(start).Round(time.Millisecond))
	if oldID != "" && oldID != newID {
		// The previous build of the test tag is now dangling; drop it (fails
		// harmlessly while something still uses it).
		rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
		composeExec(rctx, nil, "", nil, "docker", "rmi", oldID)
		rcancel()
	}
	return cli, image
}

func composeImageID(image string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, err := composeExec(ctx, nil, "", nil, "docker", "image", "inspect", "-f", "{{.Id}}", image)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

var _ localgroup.Launcher = (*composeCluster)(nil)

// composeCluster is one running compose project of docker-compose.yml,
// driven like any other group through its composegroup.Group.
type composeCluster struct {
	*composegroup.Group
	t           *testing.T
	root        string
	project     string
	env         []string
	cli         string
	image       string
	ports       map[string]int // client port published for each node
	httpPorts   map[string]int
	namesrvPort int // the name server's published port (RocketMQ clients)
	// produceHasTimeout tells whether `raftmq produce` has a --timeout flag.
	produceHasTimeout bool
}

// composeUp builds the image, starts a fresh group under a unique project
// name with free published ports and registers its removal (containers,
// network and volumes) with t.Cleanup, also when the test fails.
func composeUp(t *testing.T) *composeCluster {
	t.Helper()
	return composeUpFiles(t)
}

// composeUpFiles is composeUp with more compose files layered over
// docker-compose.yml (names relative to the repository root).
func composeUpFiles(t *testing.T, more ...string) *composeCluster {
	t.Helper()
	composeRequire(t)
	root := composeRepoRoot(t)
	cli, image := composeBuildImage(t, root)
	cmd, _ := composeCommand()

	c := &composeCluster{
		t:         t,
		root:      root,
		project:   "raftmq-it-" + composeRandomHex(4),
		cli:       cli,
		image:     image,
		ports:     map[string]int{},
		httpPorts: map[string]int{},
	}
	ports := composeFreePorts(t, 2*len(composeNodes))
	env := os.Environ()
	env = append(env, "RAFTMQ_IMAGE="+image, "COMPOSE_PROJECT_NAME="+c.project)
	for i, n := range composeNodes {
		c.ports[n] = ports[i]
		c.httpPorts[n] = ports[len(composeNodes)+i]
		up := strings.ToUpper(n)
		env = append(env,
			fmt.Sprintf("RAFTMQ_%s_PORT=%d", up, c.ports[n]),
			fmt.Sprintf("RAFTMQ_%s_HTTP_PORT=%d", up, c.httpPorts[n]))
	}
	// The name server and remoting ports, free too, so that projects run
	// side by side.
	extra := composeFreePorts(t, 1+len(composeNodes))
	c.namesrvPort = extra[0]
	env = append(env, fmt.Sprintf("RAFTMQ_NAMESRV_PORT=%d", extra[0]))
	for i, n := range composeNodes {
		env = append(env, fmt.Sprintf("RAFTMQ_%s_REMOTING_PORT=%d", strings.ToUpper(n), extra[1+i]))
	}
	c.env = env
	var files []string
	for _, f := range more {
		files = append(files, filepath.Join(root, f))
	}
	g, err := composegroup.New(context.Background(), composegroup.Config{Command: cmd, File: filepath.Join(root, "docker-compose.yml"),
		Files: files, Project: c.project, Env: env, Dir: root})
	if err != nil {
		t.Fatal(err)
	}
	c.Group = g

	help, helpErr, _ := c.cliRun(10*time.Second, nil, "produce", "--help")
	c.produceHasTimeout = bytes.Contains(help, []byte("--timeout")) || bytes.Contains(helpErr, []byte("--timeout"))

	t.Cleanup(c.down)
	t.Logf("compose project %s, client ports %v, http ports %v", c.project, c.ports, c.httpPorts)
	start := time.Now()
	if out, err := c.composeRun(5*time.Minute, "up", "-d"); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	t.Logf("compose up -d took %v", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Discover(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// down removes the project's containers, network and volumes; on failure it
// first logs the containers' output.
func (c *composeCluster) down() {
	t := c.t
	if t.Failed() {
		if out, err := c.composeRun(time.Minute, "ps"); err == nil {
			t.Logf("compose ps:\n%s", out)
		}
		if out, err := c.composeRun(2*time.Minute, "logs", "--no-color", "--tail=150"); err == nil {
			t.Logf("compose logs (last 150 lines per node):\n%s", out)
		}
	}
	start := time.Now()
	if out, err := c.composeRun(3*time.Minute, "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
		t.Errorf("compose down: %v\n%s", err, out)
		return
	}
	t.Logf("compose down -v took %v", time.Since(start).Round(time.Millisecond))
}

// composeRun runs a compose subcommand on this project; it returns combined output.
func (c *composeCluster) composeRun(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return c.RunLong(ctx, args...)
}

// cliRun runs the host raftmq CLI.
func (c *composeCluster) cliRun(timeout time.Duration, stdin []byte, args ...string) ([]byte, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return composeExec(ctx, nil, "", stdin, c.cli, args...)
}

// addrs is the -s value for the given nodes (all nodes when none given).
func (c *composeCluster) addrs(nodes ...string) string {
	if len(nodes) == 0 {
		nodes = composeNodes
	}
	var parts []string
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("127.0.0.1:%d", c.ports[n]))
	}
	return strings.Join(parts, ",")
}

func composeOthers(node string) []string {
	var out []string
	for _, n := range composeNodes {
		if n != node {
			out = append(out, n)
		}
	}
	return out
}

// containerID is the docker container id of a service.
func (c *composeCluster) containerID(service string) string {
	c.t.Helper()
	out, err := c.composeRun(time.Minute, "ps", "-q", service)
	if err != nil {
		c.t.Fatalf("compose ps -q %s: %v\n%s", service, err, out)
	}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if len(line) >= 12 && isHex(line) {
			return line
		}
	}
	c.t.Fatalf("no container for service %s: %q", service, out)
	return ""
}

func isHex(s string) bool {
	_, err := hex.DecodeString(s[:len(s)&^1])
	return err == nil
}

// dockerHealth is the docker healthcheck state of a service's container.
func (c *composeCluster) dockerHealth(service string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _, err := composeExec(ctx, nil, "", nil, "docker", "inspect", "-f",
		"{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}", c.containerID(service))
	if err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSpace(string(out))
}

// composeUint decodes a JSON number or a decimal string (protojson writes
// 64-bit integers as strings).
type composeUint uint64

func (u *composeUint) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*u = 0
		return nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return err
		}
		v = uint64(f)
	}
	*u = composeUint(v)
	return nil
}

type composeNodeStatus struct {
	ID            string      `json:"id"`
	Role          string      `json:"role"`
	RaftAddress   string      `json:"raft_address"`
	ClientAddress string      `json:"client_address"`
	HTTPAddress   string      `json:"http_address"`
	AppliedIndex  composeUint `json:"applied_index"`
	CommitIndex   composeUint `json:"commit_index"`
	LastIndex     composeUint `json:"last_index"`
	Healthy       bool        `json:"healthy"`
	Error         string      `json:"error"`
}

type composeStatus struct {
	Group         string              `json:"group"`
	Term          composeUint         `json:"term"`
	LeaderID      string              `json:"leader_id"`
	LeaderAddress string              `json:"leader_address"`
	Nodes         []composeNodeStatus `json:"nodes"`
	raw           string
}

func (s *composeStatus) node(id string) (composeNodeStatus, bool) {
	for _, n := range s.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return composeNodeStatus{}, false
}

func (s *composeStatus) String() string { return s.raw }

// composeStatus asks `raftmq status --json` through the given nodes.
func (c *composeCluster) composeStatus(nodes ...string) (*composeStatus, error) {
	out, stderr, err := c.cliRun(15*time.Second, nil, "status", "-s", c.addrs(nodes...), "--json")
	if !statusAnswered(err) {
		return nil, fmt.Errorf("raftmq status: %v: %s", err, composeTail(stderr, 500))
	}
	st := &composeStatus{raw: strings.TrimSpace(string(out))}
	if err := json.Unmarshal(bytes.TrimSpace(out), st); err != nil {
		return nil, fmt.Errorf("raftmq status --json: %v: %q", err, composeTail(out, 500))
	}
	return st, nil
}

// composeWaitStatus polls status (through the given nodes) every 500ms until
// cond holds, and fails the test after timeout with the last status or error.
func (c *composeCluster) composeWaitStatus(what string, timeout time.Duration, nodes []string, cond func(*composeStatus) bool) *composeStatus {
	c.t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var last string
	for {
		st, err := c.composeStatus(nodes...)
		if err == nil && cond(st) {
			c.t.Logf("%s after %v (term %d, leader %s)", what, time.Since(start).Round(time.Millisecond), st.Term, st.LeaderID)
			return st
		}
		if err != nil {
			last = err.Error()
		} else {
			last = st.raw
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s; last status: %s", timeout, what, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// composeAllHealthy: a leader is known and all three nodes report healthy.
func composeAllHealthy(st *composeStatus) bool {
	if st.LeaderID == "" || len(st.Nodes) != len(composeNodes) {
		return false
	}
	for _, id := range composeNodes {
		n, ok := st.node(id)
		if !ok || !n.Healthy {
			return false
		}
	}
	return true
}

// composeConverged: all healthy, one leader, and every node has the same
// applied and last index.
func composeConverged(st *composeStatus) bool {
	if !composeAllHealthy(st) {
		return false
	}
	first := st.Nodes[0]
	if first.AppliedIndex == 0 {
		return false
	}
	leaders := 0
	for _, n := range st.Nodes {
		if strings.EqualFold(n.Role, "leader") {
			leaders++
		}
		if n.AppliedIndex != first.AppliedIndex || n.LastIndex != first.LastIndex {
			return false
		}
	}
	return leaders == 1
}

// waitHealthy waits until status reports a leader and three healthy nodes.
func (c *composeCluster) waitHealthy() *composeStatus {
	c.t.Helper()
	return c.composeWaitStatus("leader and 3 healthy nodes", composeWaitTimeout, nil, composeAllHealthy)
}

// createTopic creates a topic, retrying briefly while the group settles.
func (c *composeCluster) createTopic(name string, queues int) {
	c.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, stderr, err := c.cliRun(composeCLITimeout, nil, "topic", "create",
			"--queues", strconv.Itoa(queues), "-s", c.addrs(), name)
		if err == nil {
			c.t.Logf("topic %s created (%d queues): %s", name, queues, strings.TrimSpace(string(out)))
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("raftmq topic create %s: %v\n%s%s", name, err, out, stderr)
		}
		c.t.Logf("topic create %s failed, retrying: %v: %s", name, err, composeTail(stderr, 300))
		time.Sleep(time.Second)
	}
}

// composeAck is one line of `raftmq produce --format json`.
type composeAck struct {
	Queue  composeUint `json:"queue"`
	Offset composeUint `json:"offset"`
	ID     string      `json:"id"`
	// Body echoes the acknowledged message (newer CLIs print it).
	Body string `json:"body"`
}

type composePos struct {
	Queue  uint64
	Offset uint64
}

func (a composeAck) pos() composePos { return composePos{uint64(a.Queue), uint64(a.Offset)} }

// composeProduceResult is the outcome of one produce invocation.
type composeProduceResult struct {
	Bodies []string
	Acks   []composeAck
	Err    error
	Stderr string
}

// ok: the CLI exited 0 and acknowledged every message.
func (r composeProduceResult) ok() bool { return r.Err == nil && len(r.Acks) == len(r.Bodies) }

// composeProduce sends bodies (one per stdin line) through the host CLI.
// extra are additional flags (e.g. --timeout).
func (c *composeCluster) composeProduce(timeout time.Duration, addrs, topic string, bodies []string, extra ...string) composeProduceResult {
	args := append([]string{"produce", "--topic", topic, "-s", addrs, "--format", "json"}, extra...)
	stdin := []byte(strings.Join(bodies, "\n") + "\n")
	out, stderr, err := c.cliRun(timeout, stdin, args...)
	return composeProduceResult{Bodies: bodies, Acks: composeParseAcks(out), Err: err, Stderr: composeTail(stderr, 500)}
}

// composeProduceAll produces bodies and fails the test unless all are acknowledged.
func (c *composeCluster) composeProduceAll(addrs, topic string, bodies []string) composeProduceResult {
	c.t.Helper()
	r := c.composeProduce(2*composeCLITimeout, addrs, topic, bodies)
	if !r.ok() {
		c.t.Fatalf("produce %d messages via %s: %d acks, err %v\n%s", len(bodies), addrs, len(r.Acks), r.Err, r.Stderr)
	}
	return r
}

func composeParseAcks(out []byte) []composeAck {
	var acks []composeAck
	for _, obj := range composeJSONLines(out) {
		if _, ok := obj["offset"]; !ok {
			continue
		}
		var a composeAck
		b, _ := json.Marshal(obj)
		if json.Unmarshal(b, &a) == nil {
			acks = append(acks, a)
		}
	}
	return acks
}

// composeJSONLines parses every line of out that is a JSON object and skips the rest.
func composeJSONLines(out []byte) []map[string]json.RawMessage {
	var objs []map[string]json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(line, &obj) == nil {
			objs = append(objs, obj)
		}
	}
	return objs
}

// composeMessage is one line of `raftmq consume --format json`.
type composeMessage struct {
	Topic  string      `json:"topic"`
	Queue  composeUint `json:"queue"`
	Offset composeUint `json:"offset"`
	ID     string      `json:"id"`
	Key    string      `json:"key"`
	Tag    string      `json:"tag"`
	Body   string      `json:"body"`
	Node   string      `json:"node"`
}

func (m composeMessage) pos() composePos { return composePos{uint64(m.Queue), uint64(m.Offset)} }

// composeBody returns the message body; bodies the tests send start with
// prefix, so a body that does not but decodes from base64 to one that does
// was base64-encoded by the JSON writer.
func composeBody(m composeMessage, prefix string) string {
	if strings.HasPrefix(m.Body, prefix) {
		return m.Body
	}
	if b, err := base64.StdEncoding.DecodeString(m.Body); err == nil && strings.HasPrefix(string(b), prefix) {
		return string(b)
	}
	return m.Body
}

// composeConsume reads topic from the earliest offset with a fresh consumer
// group through the host CLI, streaming its output. It stops when max
// messages arrived, when the CLI exits, or when done(messages) holds and no
// new message came for idle. It fails the test at timeout.
func (c *composeCluster) composeConsume(addrs, topic string, max int, timeout, idle time.Duration, done func([]composeMessage) bool) []composeMessage {
	c.t.Helper()
	group := "it-" + composeRandomHex(4)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.cli, "consume", "--topic", topic, "--group", group,
		"--from", "earliest", "--max", strconv.Itoa(max), "-s", addrs, "--format", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start raftmq consume: %v", err)
	}
	lines := make(chan []byte)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	var msgs []composeMessage
	var bad []string
	var maxTimer *time.Timer
	idleTimer := time.NewTimer(idle)
	defer idleTimer.Stop()
	stop := func() {
		cancel()
		for range lines {
		}
		cmd.Wait()
	}
	start := time.Now()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				werr := cmd.Wait()
				if werr != nil && len(msgs) < max && !(done != nil && done(msgs)) {
					c.t.Fatalf("raftmq consume exited after %d messages: %v\n%s", len(msgs), werr, composeTail(stderr.Bytes(), 2000))
				}
				c.t.Logf("consumed %d messages in %v (CLI exited: %v)", len(msgs), time.Since(start).Round(time.Millisecond), werr)
				return msgs
			}
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			var m composeMessage
			if line[0] != '{' || json.Unmarshal(line, &m) != nil {
				bad = append(bad, string(line))
				continue
			}
			msgs = append(msgs, m)
			if len(msgs) >= max && maxTimer == nil {
				// --max reached: give the CLI a moment to exit by itself
				// (a timer, not a sleeping goroutine that outlives the test).
				maxTimer = time.AfterFunc(5*time.Second, cancel)
				defer maxTimer.Stop()
			}
			if !idleTimer.Stop() {
				select {
				case <-idleTimer.C:
				default:
				}
			}
			idleTimer.Reset(idle)
		case <-idleTimer.C:
			if done != nil && done(msgs) {
				stop()
				c.t.Logf("consumed %d messages in %v (stopped after %v without new messages)", len(msgs), time.Since(start).Round(time.Millisecond), idle)
				return msgs
			}
			idleTimer.Reset(idle)
		case <-ctx.Done():
			stop()
			if len(msgs) >= max {
				return msgs
			}
			c.t.Fatalf("raftmq consume: timed out after %v with %d of up to %d messages; non-JSON lines %q; stderr:\n%s",
				timeout, len(msgs), max, bad, composeTail(stderr.Bytes(), 2000))
			return nil
		}
	}
}

// composeBodies makes n numbered bodies "<prefix><first+i>".
func composeBodies(prefix string, first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%06d", prefix, first+i)
	}
	return out
}

// composeLedger records what the CLI was told of every message produced
// (one op per message: acknowledged, refused, or of unknown outcome when
// its invocation failed) and checks what was consumed with
// internal/history.
type composeLedger struct {
	mu  sync.Mutex
	ops []history.Op
	// ackedPos are acknowledged positions the CLI printed without a body;
	// each must be present.
	ackedPos map[composePos]bool
}

func newComposeLedger() *composeLedger {
	return &composeLedger{ackedPos: map[composePos]bool{}}
}

func (l *composeLedger) addLocked(body string, outcome history.Outcome, ack *composeAck) {
	op := history.Op{Worker: "cli", Seq: uint64(len(l.ops) + 1), Outcome: outcome,
		Messages: []history.SentMessage{{Body: body, Hash: history.BodyHash([]byte(body)), Queue: -1}}}
	if ack != nil {
		op.Acks = []history.Ack{{Queue: int32(ack.Queue), Offset: uint64(ack.Offset), ID: ack.ID}}
	}
	l.ops = append(l.ops, op)
}

func (l *composeLedger) record(r composeProduceResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ackOf := map[string]*composeAck{}
	for i, a := range r.Acks {
		if a.Body != "" {
			ackOf[a.Body] = &r.Acks[i]
		} else {
			l.ackedPos[a.pos()] = true
		}
	}
	for _, b := range r.Bodies {
		if a := ackOf[b]; a != nil {
			l.addLocked(b, history.OutcomeOK, a)
		} else {
			l.addLocked(b, history.OutcomeUnknown, nil)
		}
	}
}

// refused records bodies whose writes were refused: they must never appear.
func (l *composeLedger) refused(bodies []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range bodies {
		l.addLocked(b, history.OutcomeFail, nil)
	}
}

func (l *composeLedger) counts() (acked, uncertain int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, op := range l.ops {
		switch op.Outcome {
		case history.OutcomeOK:
			acked++
		case history.OutcomeUnknown:
			uncertain++
		}
	}
	return acked, uncertain
}

// allAckedSeen: every acknowledged body is among msgs.
func (l *composeLedger) allAckedSeen(prefix string) func([]composeMessage) bool {
	return func(msgs []composeMessage) bool {
		seen := map[string]bool{}
		for _, m := range msgs {
			seen[composeBody(m, prefix)] = true
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, op := range l.ops {
			if op.Outcome == history.OutcomeOK && !seen[op.Messages[0].Body] {
				return false
			}
		}
		return true
	}
}

// check verifies what was consumed against what the CLI was told: every
// acknowledged body exactly once where its ack said, no body twice, no
// unknown or refused body, offsets dense, every acknowledged position
// present.
func (l *composeLedger) check(t *testing.T, prefix string, msgs []composeMessage) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	final := history.QueueLog{}
	byPos := map[composePos]bool{}
	for _, m := range msgs {
		b := composeBody(m, prefix)
		q := int32(m.Queue)
		final[q] = append(final[q], history.LogEntry{Offset: uint64(m.Offset), ID: m.ID, Body: b, Hash: history.BodyHash([]byte(b)), Key: m.Key, Tag: m.Tag})
		byPos[m.pos()] = true
	}
	for _, es := range final {
		sort.SliceStable(es, func(i, j int) bool { return es[i].Offset < es[j].Offset })
	}
	r := history.Check(&history.History{Ops: l.ops, Final: final})
	var errs []string
	if !r.OK() {
		errs = append(errs, r.Errors())
	}
	for p := range l.ackedPos {
		if !byPos[p] {
			errs = append(errs, fmt.Sprintf("acknowledged position queue %d offset %d missing", p.Queue, p.Offset))
		}
	}
	t.Logf("ledger: %d acked, %d uncertain (%d of them stored), %d refused; consumed %d messages, %d acked missing",
		r.Acked, r.Unknown, r.UnknownPresent, r.Failed, len(msgs), r.Lost)
	if len(errs) > 0 {
		t.Errorf("consumed data does not match what was produced:\n  %s", strings.Join(errs, "\n  "))
	}
}

// composeSecrets copies the CA certificate and the first admin's secret
// that the project's secure-init service made out of its container (the
// secrets volume) into a temporary directory; run runs a compose command
// of the project.
func composeSecrets(t *testing.T, run func(time.Duration, ...string) (string, error)) (ca, secret string) {
	t.Helper()
	dir := t.TempDir()
	id, err := run(time.Minute, "ps", "-q", "secure-init")
	if err != nil || strings.TrimSpace(id) == "" {
		t.Fatalf("compose ps -q secure-init: %v %s", err, id)
	}
	for _, f := range []string{"ca.pem", "admin.secret"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, errOut, err := composeExec(ctx, nil, "", nil, "docker", "cp", strings.TrimSpace(id)+":/secure/"+f, filepath.Join(dir, f))
		cancel()
		if err != nil {
			t.Fatalf("docker cp %s: %v %s", f, err, errOut)
		}
	}
	return filepath.Join(dir, "ca.pem"), filepath.Join(dir, "admin.secret")
}
