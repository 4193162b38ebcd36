package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/server"
	"github.com/raftmq/raftmq/internal/servertest"
)

// cluster is a servertest group of real nodes (real raft straight over
// loopback TCP, real raft-wal with fsync, in temp dirs), with this
// package's produce helper.
type cluster struct {
	*servertest.Cluster
	t *testing.T
}

// stop stops node i: gracefully (Close) or as a crash (Kill).
func (c *cluster) stop(i int, graceful bool) {
	if graceful {
		c.Stop(i)
	} else {
		c.Kill(i)
	}
}

// freeAddr is servertest.FreeAddr.
func freeAddr(t testing.TB) string { return servertest.FreeAddr(t) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// newCluster starts n nodes; mod, when not nil, changes node i's config
// before its first start.
func newCluster(t *testing.T, n int, mod func(i int, c *server.Config)) *cluster {
	t.Helper()
	opts := []servertest.Option{servertest.Direct()}
	if mod != nil {
		opts = append(opts, servertest.Configure(mod))
	}
	return &cluster{servertest.New(t, n, opts...), t}
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// produce sends one request to whichever node leads, retrying (with the
// same producer id and sequence) across leader changes, as the client does.
func (c *cluster) produce(ctx context.Context, req broker.ProduceRequest) (broker.ProduceResult, error) {
	return produceTo(ctx, c.t, c.Cluster, req)
}

// produceTo is (*cluster).produce on a servertest cluster.
func produceTo(ctx context.Context, t testing.TB, c *servertest.Cluster, req broker.ProduceRequest) (broker.ProduceResult, error) {
	return produceRetrying(ctx, t, func() *broker.Broker { return c.Node(c.Leader()).Broker() }, req)
}

func produceRetrying(ctx context.Context, t testing.TB, leader func() *broker.Broker, req broker.ProduceRequest) (broker.ProduceResult, error) {
	for {
		res, err := leader().Produce(ctx, req)
		if err == nil || ctx.Err() != nil {
			return res, err
		}
		if !errors.Is(err, broker.ErrNotLeader) && !errors.Is(err, broker.ErrUnavailable) && !errors.Is(err, broker.ErrUnknownOutcome) {
			return res, err
		}
		t.Logf("retrying produce after: %v", err)
		time.Sleep(20 * time.Millisecond)
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
