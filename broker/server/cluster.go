package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/console"
	"github.com/raftmq/raftmq/broker/grpcapi"
	brokerremoting "github.com/raftmq/raftmq/broker/remoting"
)

// clusterView answers the console's cluster overview on a node started
// with name servers: every group they list, each as one of its own nodes
// tells it. The adapter that asks the name servers is set once it starts
// (after the console, which may be asked before).
type clusterView struct {
	b     *broker.Broker
	peers *grpcapi.Peers
	ns    atomic.Pointer[brokerremoting.Adapter]
}

var errNotRegistered = errors.New("this node has not started its name server client yet")

// Groups asks the name servers for the cluster, then every group at once
// for its status: this node's own group locally, another through its
// registered nodes, the leader first, until one answers.
func (v *clusterView) Groups(ctx context.Context) ([]console.GroupStatus, error) {
	a := v.ns.Load()
	if a == nil {
		return nil, errNotRegistered
	}
	ci, err := a.ClusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(ci.RaftmqGroups))
	out := make([]console.GroupStatus, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		g := ci.RaftmqGroups[name]
		out[i].Name, out[i].Cluster = name, g.Cluster
		if name == v.b.Config().Group {
			out[i].Status, out[i].Err = v.b.Status()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Status, out[i].Err = v.ask(ctx, g.ClientAddrs)
		}()
	}
	wg.Wait()
	return out, nil
}

// ask asks a group's nodes (brokerId -> client API address, 0 the leader)
// for the group's status, in brokerId order, until one answers.
func (v *clusterView) ask(ctx context.Context, addrs map[int64]string) (broker.Status, error) {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(addrs)) {
		st, err := v.peers.GroupStatus(ctx, addrs[id])
		if err == nil {
			return st, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addrs[id], err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return broker.Status{}, errors.New("no node of the group is registered")
	}
	return broker.Status{}, errors.Join(errs...)
}
