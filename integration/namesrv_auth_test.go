package integration

// The name server with --auth enforcing, as a process: the nodes' signed
// registrations (with the group's sealed users) are routed, an unsigned
// registration is refused and never routed, and the unmodified RocketMQ Go
// client with credentials produces through it, while without credentials
// or with a wrong secret it gets no route.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/raftmq/raftmq/internal/localgroup"
	"github.com/raftmq/raftmq/namesrv"
	"github.com/raftmq/raftmq/remoting"
)

// procNamesrv runs `raftmq namesrv` with args (--listen and --http are
// added) until the test ends; it returns the remoting and HTTP addresses
// and the process's output so far.
func procNamesrv(t *testing.T, args ...string) (string, string, func() string) {
	t.Helper()
	ports, err := localgroup.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	addr, httpAddr := fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	cmd := exec.Command(procBinary(t), append([]string{"namesrv", "--listen", addr, "--http", httpAddr, "--log-level", "debug"}, args...)...)
	var mu sync.Mutex
	var out bytes.Buffer
	w := lockedWriter{&mu, &out}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	procWaitFor(t, 20*time.Second, "the name server's /healthz", func() (bool, string) {
		resp, err := http.Get("http://" + httpAddr + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
	return addr, httpAddr, func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestNamesrvAuthEnforcing(t *testing.T) {
	procRequire(t)
	dir := t.TempDir()
	keyFile, adminFile, u1File := filepath.Join(dir, "auth.key"), filepath.Join(dir, "admin.secret"), filepath.Join(dir, "u1.secret")
	for f, s := range map[string]string{keyFile: strings.Repeat("0123456789abcdef", 4), adminFile: "root-secret\n", u1File: "u1-secret\n"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ns, nsHTTP, nsLog := procNamesrv(t, "--auth", "enforcing", "--auth-key-file", keyFile)
	c := procStartGroup(t, localgroup.Config{Nodes: 3, Remoting: true, ServerArgs: []string{"--namesrv", ns, "--register-period", "2s",
		"--auth", "enforcing", "--auth-key-file", keyFile, "--auth-admin-user", "root", "--auth-admin-secret-file", adminFile}})
	s := c.addrs()
	root := []string{"--access-key", "root", "--secret-key-file", adminFile}
	cli := func(args ...string) string { return c.mustCLI("", append(args, root...)...) }
	const topic = "nsauth-orders"
	cli("topic", "create", topic, "--queues", "4", "-s", s)
	cli("user", "add", "u1", "--secret-file", u1File, "-s", s)
	cli("acl", "grant", "u1", "topic:nsauth-*", "publish", "-s", s)

	// The routes command signs with --access-key; the name server knows
	// the users from the nodes' registrations.
	procWaitFor(t, 30*time.Second, "the topic routed to three nodes", func() (bool, string) {
		out, errOut, err := c.cli("", append([]string{"namesrv", "routes", "--namesrv", ns, "--topic", topic, "--json"}, root...)...)
		return err == nil && strings.Count(out, `"127.0.0.1:`) >= 3, out + errOut
	})
	if _, errOut, err := c.cli("", "namesrv", "routes", "--namesrv", ns); err == nil || !strings.Contains(errOut, "code 16") {
		t.Fatalf("namesrv routes without credentials: %v %s", err, errOut)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	u1 := primitive.Credentials{AccessKey: "u1", SecretKey: "u1-secret"}
	good := rmqAuthProducer(t, ns, "nsauth-pg", &u1)
	procWaitFor(t, 30*time.Second, "a send through the enforcing name server", func() (bool, string) {
		_, err := good.SendSync(ctx, primitive.NewMessage(topic, []byte("first")))
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	for i := range 10 {
		if _, err := good.SendSync(ctx, primitive.NewMessage(topic, []byte(fmt.Sprint("m", i)))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	// Without credentials or with a wrong secret the client gets no
	// route: the name server answers NO_PERMISSION, which the Go client
	// reports as a topic without a route.
	for name, cred := range map[string]*primitive.Credentials{"no credentials": nil, "wrong secret": {AccessKey: "u1", SecretKey: "nope"}} {
		p := rmqAuthProducer(t, ns, "nsauth-pg-"+strings.ReplaceAll(name, " ", "-"), cred)
		_, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("refused-"+name)))
		if err == nil {
			t.Errorf("%s: a send through the enforcing name server was taken", name)
		}
		p.Shutdown()
	}

	// RocketMQ's Go admin API sends FetchAllTopicList through its shared
	// client, which signs only once RegisterACL has run (CreateTopic and
	// FetchAllTopicList never call it): the enforcing name server refuses
	// it even with credentials.
	adm, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{ns})),
		admin.WithCredentials(primitive.Credentials{AccessKey: "root", SecretKey: "root-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adm.FetchAllTopicList(ctx); err == nil {
		t.Error("the Go admin API's unsigned FetchAllTopicList was answered by the enforcing name server")
	}
	adm.Close()

	// A registration without the node credential (here: signed by the
	// admin user) is refused and its route never appears.
	cl := remoting.NewClient()
	defer cl.Close()
	forged, err := namesrv.RegisterRequest(namesrv.Registration{Cluster: "DefaultCluster", Group: "intruder", Addr: "127.0.0.1:1", NodeID: "x", Term: 99,
		Topics: map[string]int{topic: 4}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
	defer rcancel()
	resp, err := cl.Invoke(rctx, ns, forged)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.NoPermission {
		t.Fatalf("unsigned registration: code %d %s, want NO_PERMISSION", resp.Code, resp.Remark)
	}
	// The wrong secret above counts against 127.0.0.1, so the name server
	// may refuse this host unchecked for a while: wait that out.
	var out string
	procWaitFor(t, 30*time.Second, "the routes once 127.0.0.1 is no longer throttled", func() (bool, string) {
		o, errOut, err := c.cli("", append([]string{"namesrv", "routes", "--namesrv", ns, "--json"}, root...)...)
		if err != nil && !strings.Contains(errOut, "too many bad signatures") {
			t.Fatalf("namesrv routes: %v\n%s", err, errOut)
		}
		out = o
		return err == nil, errOut
	})
	if strings.Contains(out, "intruder") || strings.Contains(out, "127.0.0.1:1\"") {
		t.Fatalf("refused registration routed:\n%s", out)
	}
	m := httpGet(t, "http://"+nsHTTP+"/metrics")
	for _, want := range []string{`raftmq_namesrv_auth_refusals_total{mode="enforcing",reason="no_credentials"}`, `raftmq_namesrv_auth_refusals_total{mode="enforcing",reason="bad_signature"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("name server metrics lack %s", want)
		}
	}
	if l := nsLog(); strings.Contains(l, "u1-secret") || strings.Contains(l, "root-secret") || !strings.Contains(l, "registration refused") {
		t.Errorf("name server log: secrets, or no refusal logged:\n%s", procCut(l, 4000))
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
