package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// bigProps is n properties of 16 KB each, the per-property limit.
func bigProps(n int) map[string]string {
	props := make(map[string]string, n)
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("prop-%03d", i)
		props[k] = strings.Repeat("v", 16<<10-len(k))
	}
	return props
}

// groupStillWorks checks what "one large request stops all writes for good"
// broke: every node is ready, a produce afterwards is acknowledged, all
// nodes apply it, and every node's log reads back from disk entry by entry.
func groupStillWorks(t *testing.T, c *cluster, topic string) {
	t.Helper()
	cl := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	p := cl.NewProducer()
	for i := 0; i < 5; i++ {
		if _, err := p.Send(ctx, topic, client.Message{Key: fmt.Sprintf("after-%d", i), Body: []byte("after")}); err != nil {
			t.Fatalf("produce after the large requests: %v", err)
		}
	}
	leader := c.Node(c.Leader())
	want := leader.Node().Stats().CommitIndex
	waitFor(t, 30*time.Second, "every node to apply the later produce", func() bool {
		for _, s := range c.Nodes() {
			if s.Node().Stats().AppliedIndex < want {
				return false
			}
		}
		return true
	})
	for i, s := range c.Nodes() {
		if err := s.Broker().Readiness(); err != nil {
			t.Errorf("node %d not ready after the large requests: %v", i, err)
		}
		n, err := s.RaftLog().Verify(store.CheckCommand)
		if err != nil {
			t.Errorf("node %d: log unreadable after %d entries: %v", i, n, err)
		}
		for idx := s.RaftLog().FirstIndex(); idx <= s.RaftLog().LastIndex(); idx++ {
			if e, err := s.RaftLog().Read(idx); err == nil && len(e.Data) > raftlog.MaxEntryBytes {
				t.Errorf("node %d: entry %d is %d bytes, over raftlog.MaxEntryBytes", i, idx, len(e.Data))
			}
		}
	}
}

// TestLargeKeysRequestRefused is the first reproduction of "one large
// request stops all writes for good": one Produce of 4,700 messages with
// 16 KiB keys (77 MB, bodies tiny). Every way in refuses it with an error
// that says what is too large, none retries it, and the group keeps
// accepting writes.
func TestLargeKeysRequestRefused(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := ctxT(t, 120*time.Second)
	b := c.Node(c.Leader()).Broker()
	if _, err := b.CreateTopic(ctx, "big", 2, false); err != nil {
		t.Fatal(err)
	}
	key := strings.Repeat("k", 16<<10)
	msgs := make([]broker.ProduceMessage, 4700)
	for i := range msgs {
		msgs[i] = broker.ProduceMessage{Key: key, Body: []byte("x")}
	}

	// The broker service (every protocol's edge).
	_, err := b.Produce(ctx, broker.ProduceRequest{Topic: "big", ProducerID: "p-keys", Seq: 1, Messages: msgs})
	if !errors.Is(err, broker.ErrTooLarge) || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Fatalf("broker: %v, want ErrTooLarge naming --max-request-bytes", err)
	}

	// The SDK: refused before sending, at once, with the limit named.
	cl := c.Client(t)
	smsgs := make([]client.Message, len(msgs))
	for i := range smsgs {
		smsgs[i] = client.Message{Key: key, Body: []byte("x")}
	}
	start := time.Now()
	_, err = cl.NewProducer().Send(ctx, "big", smsgs...)
	if !errors.Is(err, client.ErrRequestTooLarge) || !strings.Contains(err.Error(), "--max-request-bytes") || time.Since(start) > 5*time.Second {
		t.Fatalf("SDK: %v after %s, want ErrRequestTooLarge at once", err, time.Since(start))
	}

	// Raw gRPC: above 5/2 of the bound gRPC refuses it unread
	// (ResourceExhausted, which the SDK must not retry); between the bound
	// and that, the broker's own error arrives as InvalidArgument.
	conn, err := api.Dial(c.Config(c.Leader()).Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	raw := api.NewBrokerClient(conn)
	pmsgs := make([]*api.ProduceMessage, len(msgs))
	for i := range pmsgs {
		pmsgs[i] = &api.ProduceMessage{Key: key, Body: []byte("x")}
	}
	_, err = raw.Produce(ctx, &api.ProduceRequest{Topic: "big", ProducerId: "p-raw", Sequence: 1, Messages: pmsgs})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "larger than max") || client.Retryable(err) {
		t.Fatalf("gRPC, 77 MB: %v (retryable %v), want a ResourceExhausted size error the SDK does not retry", err, client.Retryable(err))
	}
	_, err = raw.Produce(ctx, &api.ProduceRequest{Topic: "big", ProducerId: "p-raw", Sequence: 2, Messages: pmsgs[:1100]})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Fatalf("gRPC, 18 MB: %v, want InvalidArgument naming --max-request-bytes", err)
	}

	groupStillWorks(t, c, "big")
}

// TestManyPropertiesRequestsNeverBuildOversizedEntry is the second
// reproduction: four concurrent requests of 16 messages x 128 properties of
// 16 KB (32 MiB each, all of it properties) are refused; four concurrent
// requests just within the bound are accepted, each in an entry of its own
// (they are larger than --max-batch-bytes), which every node reads back.
// The bound is 1 MiB here so that the accepted requests replicate well
// within the 250 ms leader lease under -race on a loaded machine (with 4 MiB
// entries a starved follower answered late and leadership moved for tens of
// seconds; docs/design-notes.md); batches of several requests near the entry
// bound are covered by broker.TestBatcherNeverBuildsOversizedEntry.
func TestManyPropertiesRequestsNeverBuildOversizedEntry(t *testing.T) {
	const bound = 1 << 20
	c := newCluster(t, 3, func(i int, cfg *server.Config) { cfg.Broker.MaxRequestBytes, cfg.Broker.MaxMessageBytes = bound, bound })
	ctx := ctxT(t, 180*time.Second)
	b := c.Node(c.Leader()).Broker()
	if _, err := b.CreateTopic(ctx, "props", 4, false); err != nil {
		t.Fatal(err)
	}
	run := func(nprops int) []error {
		props := bigProps(nprops)
		errs := make([]error, 4)
		var wg sync.WaitGroup
		for r := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				msgs := make([]broker.ProduceMessage, 16)
				for i := range msgs {
					msgs[i] = broker.ProduceMessage{Properties: props, Body: []byte("x")}
				}
				_, errs[r] = c.produce(ctx, broker.ProduceRequest{Topic: "props", ProducerID: fmt.Sprintf("p-%d-%d", nprops, r), Seq: 1, Messages: msgs})
			}()
		}
		wg.Wait()
		return errs
	}
	for r, err := range run(128) {
		if !errors.Is(err, broker.ErrTooLarge) || !strings.Contains(err.Error(), "--max-request-bytes") {
			t.Errorf("request %d of 16 x 128 x 16 KB: %v, want ErrTooLarge naming --max-request-bytes", r, err)
		}
	}
	// 16 x 3 x 16 KB is under the bound; 16 x 4 x 16 KB is just over.
	for r, err := range run(4) {
		if !errors.Is(err, broker.ErrTooLarge) {
			t.Errorf("request %d of 16 x 4 x 16 KB (just over %d): %v, want ErrTooLarge", r, bound, err)
		}
	}
	before := c.Node(c.Leader()).Node().Stats().LastIndex
	for r, err := range run(3) {
		if err != nil {
			t.Errorf("request %d of 16 x 3 x 16 KB (under %d): %v", r, bound, err)
		}
	}
	if after := c.Node(c.Leader()).Node().Stats().LastIndex; after-before < 4 {
		t.Errorf("four requests of almost %d bytes took %d entries, want one each", bound, after-before)
	}
	groupStillWorks(t, c, "props")
}

// TestCommitOffsetsListBounded: a metadata command is an entry too; a commit
// of an offset list that encodes above the request bound is refused.
func TestCommitOffsetsListBounded(t *testing.T) {
	c := newCluster(t, 1, func(i int, cfg *server.Config) {
		cfg.Broker.MaxRequestBytes, cfg.Broker.MaxMessageBytes = 64<<10, 64<<10
	})
	ctx := ctxT(t, 60*time.Second)
	b := c.Node(c.Leader()).Broker()
	if _, err := b.CreateTopic(ctx, "t", 1, false); err != nil {
		t.Fatal(err)
	}
	offsets := make([]store.OffsetEntry, 5000)
	for i := range offsets {
		offsets[i] = store.OffsetEntry{Topic: "t", Queue: 0, Offset: 0}
	}
	if err := b.CommitOffsets(ctx, "g", offsets); !errors.Is(err, broker.ErrTooLarge) || !strings.Contains(err.Error(), "--max-request-bytes") {
		t.Fatalf("commit of 5,000 offsets: %v, want ErrTooLarge naming --max-request-bytes", err)
	}
	if err := b.CommitOffsets(ctx, "g", offsets[:10]); err != nil {
		t.Fatalf("commit of 10 offsets: %v", err)
	}
}

// TestNotReadyWhenLeaderCannotReplicate: the state "one large request stops
// all writes for good" left a group in: the leader holds an entry it cannot
// read back to replicate (written here past the broker, straight to raft),
// stays leader because heartbeats still work, and nothing commits. /readyz
// and the status `raftmq health` reads must say not ready, with the reason;
// before that, a healthy idle group must say ready on every node.
func TestNotReadyWhenLeaderCannotReplicate(t *testing.T) {
	c := newCluster(t, 3, func(i int, cfg *server.Config) {
		cfg.HTTP = freeAddr(t)
		cfg.Broker.WriteTimeout = 2 * time.Second
	})
	li := c.Leader()
	readyz := func(i int) (int, string) {
		resp, err := http.Get("http://" + c.Config(i).HTTP + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	waitFor(t, 20*time.Second, "every node ready", func() bool {
		for i := range c.Nodes() {
			if code, _ := readyz(i); code != http.StatusOK {
				return false
			}
		}
		return true
	})
	// Idle and healthy for longer than the stall limit: no false alarm.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for i := range c.Nodes() {
			if code, body := readyz(i); code != http.StatusOK {
				t.Fatalf("healthy idle node %d: /readyz %d %s", i, code, body)
			}
		}
	}

	huge := make([]byte, 65<<20)
	huge[0] = byte(raftlog.CmdMeta)
	c.Node(li).Store().ApplyAsync(huge, time.Second)

	var body string
	waitFor(t, 60*time.Second, "the stuck leader's /readyz to say not ready", func() bool {
		var code int
		code, body = readyz(li)
		return code == http.StatusServiceUnavailable
	})
	// Either reason is right: the leader cannot commit the entry, and once
	// raft reads it back to replicate it finds it damaged (the read fails).
	// On a loaded machine the followers may elect another leader while the
	// entry is sent; the node that stepped down is then not ready for want
	// of a leader, which is right too.
	steppedDown := c.Node(li).Node().Role() != "leader"
	if steppedDown {
		t.Logf("node %d is no longer leader: /readyz %q", li, body)
	}
	if !steppedDown && !strings.Contains(body, "cannot commit") && !strings.Contains(body, "damaged") {
		t.Errorf("/readyz of the stuck leader: %q, want the reason", body)
	}
	cl := c.Client(t)
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := cl.StatusOf(sctx, c.Config(li).Listen)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range st.Nodes {
		if n.Id == st.AnsweredBy && (n.Healthy || !steppedDown && !strings.Contains(n.Error, "cannot commit") && !n.Damaged) {
			t.Errorf("status of the stuck leader about itself: healthy %v, error %q, damaged %v; `raftmq health` reads these", n.Healthy, n.Error, n.Damaged)
		}
	}
}

// TestSDKCoalescedRequestsStayWithinBound: many concurrent Sends whose
// properties dominate their size are coalesced by the SDK into requests the
// broker accepts: the SDK counts properties and tags too, or a coalesced
// request could exceed any bound on the whole request.
func TestSDKCoalescedRequestsStayWithinBound(t *testing.T) {
	const bound = 64 << 10
	c := newCluster(t, 1, func(i int, cfg *server.Config) { cfg.Broker.MaxRequestBytes, cfg.Broker.MaxMessageBytes = bound, bound })
	cl := c.Client(t)
	ctx := ctxT(t, 60*time.Second)
	if _, err := cl.CreateTopic(ctx, "co", 2, false); err != nil {
		t.Fatal(err)
	}
	p := cl.NewProducerWith(client.ProducerConfig{RequestLimit: bound, MaxRequestBytes: 1 << 20, MaxInflight: 1})
	props := map[string]string{"trace": strings.Repeat("t", 3000)}
	const sends = 200
	errs := make(chan error, sends)
	for i := 0; i < sends; i++ {
		p.SendAsync("co", []client.Message{{Properties: props, Body: []byte("b")}}, func(_ []*api.Ack, err error) { errs <- err })
	}
	for i := 0; i < sends; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
}

// TestStartRefusesRequestBoundOverOneEntry: a node whose request bound
// could not fit in one Raft entry refuses to start, naming the flag.
func TestStartRefusesRequestBoundOverOneEntry(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = freeAddr(t)
	cfg.Raft.ID = "n1"
	cfg.Raft.BindAddr = freeAddr(t)
	cfg.Broker.MaxRequestBytes = 80 << 20
	s, err := server.Start(cfg)
	if err == nil {
		s.Kill()
		t.Fatal("started with an 80 MiB request bound")
	}
	if !strings.Contains(err.Error(), "max-request-bytes") {
		t.Fatalf("start: %v, want an error naming max-request-bytes", err)
	}
}
