package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"google.golang.org/grpc"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/remoting"
)

// TestRocketMQAuthRollingMove: a running group moves from --auth disabled
// to permissive to enforcing one node at a time while a RocketMQ producer
// with credentials sends: it is never refused, every message it was
// acknowledged is stored, permissive nodes serve and count an unsigned
// request, and once every node enforces, unsigned requests are refused
// everywhere.
func TestRocketMQAuthRollingMove(t *testing.T) {
	dir := t.TempDir()
	keyFile, adminFile, u1File := filepath.Join(dir, "auth.key"), filepath.Join(dir, "admin.secret"), filepath.Join(dir, "u1.secret")
	for f, s := range map[string]string{keyFile: strings.Repeat("fedcba9876543210", 4), adminFile: "root-secret", u1File: "u1-secret"} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, ns := rmqStartGroup(t, "--auth", "disabled", "--auth-key-file", keyFile, "--auth-admin-user", "root", "--auth-admin-secret-file", adminFile)
	const topic = "roll"
	s := c.addrs()
	root := []string{"--access-key", "root", "--secret-key-file", adminFile}
	c.mustCLI("", append([]string{"topic", "create", topic, "--queues", "4", "-s", s}, root...)...)
	c.mustCLI("", append([]string{"user", "add", "u1", "--secret-file", u1File, "-s", s}, root...)...)
	c.mustCLI("", append([]string{"acl", "grant", "u1", "topic:" + topic, "publish,subscribe", "-s", s}, root...)...)

	p := rmqAuthProducer(t, ns.Addr(), "roll-pg", &primitive.Credentials{AccessKey: "u1", SecretKey: "u1-secret"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		mu      sync.Mutex
		acked   []string
		refused []string
		failed  int
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			b := fmt.Sprintf("roll-%d", i)
			_, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(b)))
			mu.Lock()
			switch {
			case err == nil:
				acked = append(acked, b)
			case strings.Contains(err.Error(), "CODE: 16"):
				refused = append(refused, err.Error())
			default:
				failed++ // a restart under way: not acknowledged, may or may not be stored
			}
			mu.Unlock()
		}
	}()
	ackedNow := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	procWaitFor(t, 30*time.Second, "the first acknowledgements", func() (bool, string) { return ackedNow() >= 10, fmt.Sprint(ackedNow()) })

	rc := remoting.NewClient()
	defer rc.Close()
	unsigned := func(addr string) *remoting.Command {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := rc.Invoke(ctx, addr, remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": "0"}, nil))
		if err != nil {
			t.Fatalf("unsigned probe of %s: %v", addr, err)
		}
		return r
	}
	for _, mode := range []string{"permissive", "enforcing"} {
		c.restartEachWith("--auth", mode, func(nd *procNode) {
			procWaitFor(t, 30*time.Second, nd.ID+" serving u1", func() (bool, string) {
				r := rmqAuthProbe(t, rc, nd.Remoting, topic, "u1", "u1-secret")
				return r.Code == remoting.Success, fmt.Sprintf("%d %s", r.Code, r.Remark)
			})
			before := ackedNow()
			procWaitFor(t, 30*time.Second, "acknowledgements after restarting "+nd.ID, func() (bool, string) {
				return ackedNow() >= before+5, fmt.Sprint(ackedNow() - before)
			})
		})
		for _, nd := range c.all() {
			r := unsigned(nd.Remoting)
			switch mode {
			case "permissive":
				if r.Code != remoting.Success {
					t.Fatalf("%s permissive: unsigned request %d %s", nd.ID, r.Code, r.Remark)
				}
				if n := rmqMetric(t, nd.HTTP, "raftmq_auth_refusals_total", `mode="permissive"`, `reason="no_credentials"`); n < 1 {
					t.Fatalf("%s permissive: no_credentials counted %v times", nd.ID, n)
				}
			case "enforcing":
				if r.Code != remoting.NoPermission {
					t.Fatalf("%s enforcing: unsigned request %d %s", nd.ID, r.Code, r.Remark)
				}
			}
		}
	}
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(refused) > 0 {
		t.Fatalf("the producer with credentials was refused %d times during the move, e.g. %s", len(refused), refused[0])
	}
	leader := c.waitLeader("")
	stored := rmqStored(t, leader, topic, grpc.WithPerRPCCredentials(client.Credentials{AccessKey: "u1", SecretKey: []byte("u1-secret")}.PerRPCCredentials()))
	var lost []string
	for _, b := range acked {
		if stored[b] == 0 {
			lost = append(lost, b)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d acknowledged messages not stored, e.g. %v", len(lost), len(acked), lost[:min(5, len(lost))])
	}
	t.Logf("%d messages acknowledged through the move (%d sends failed during restarts), all stored", len(acked), failed)
}
