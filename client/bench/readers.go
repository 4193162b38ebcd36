package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// reader is one consumer of a consume run.
type reader interface {
	poll(ctx context.Context) ([]client.Record, error)
	// caughtUp reports whether the reader has handed out everything up
	// to the end offsets seen at the start.
	caughtUp() bool
	// servedBy counts the messages read so far by serving node.
	servedBy() map[string]int
}

// readerSet is the readers of a run and what the run reads of the group
// or groups behind them.
type readerSet struct {
	readers []reader
	term    func(ctx context.Context) uint64 // the sum of the groups' terms; 0 when one did not answer
	close   func()
}

// consumerConfig is a reader's client.ConsumerConfig: a fresh consumer
// group that commits nothing.
func consumerConfig(cfg *ConsumeConfig) client.ConsumerConfig {
	cc := client.DefaultConsumerConfig(cfg.Topic, cfg.Group)
	cc.FollowerReads = cfg.FollowerReads
	cc.MaxMessages = cfg.MaxMessages
	cc.MaxBytes = 16 << 20
	cc.Wait = 100 * time.Millisecond
	cc.CommitInterval = 0 // commit nothing: a bench group is throwaway
	if cfg.Live {
		cc.From = "latest"
	}
	return cc
}

// groupReader reads pinned queues of one group.
type groupReader struct {
	cons *client.Consumer
	end  map[int32]uint64
}

func (r *groupReader) poll(ctx context.Context) ([]client.Record, error) { return r.cons.Poll(ctx) }
func (r *groupReader) servedBy() map[string]int                          { return r.cons.ServedBy() }

func (r *groupReader) caughtUp() bool { return !anyToRead(r.end) || r.cons.CaughtUp(r.end) }

// anyToRead reports whether some queue of end has messages.
func anyToRead[Q comparable](end map[Q]uint64) bool {
	for _, e := range end {
		if e > 0 {
			return true
		}
	}
	return false
}

// openGroupReaders describes the topic on the group at cfg.Servers into
// res and makes the readers: consumer i reads queues i, i+n, ..., each with
// its own connection.
func openGroupReaders(ctx context.Context, cfg *ConsumeConfig, res *ConsumeResult) (*readerSet, error) {
	var clients []*client.Client
	rs := &readerSet{close: func() {
		for _, c := range clients {
			c.Close()
		}
	}}
	admin, err := newClient(cfg.Servers, cfg.Timeout, cfg.TLS, cfg.Credentials)
	if err != nil {
		return rs, err
	}
	clients = append(clients, admin)
	rs.term = func(ctx context.Context) uint64 { return term(ctx, admin) }
	ti, err := admin.DescribeTopic(ctx, cfg.Topic)
	if err != nil {
		return rs, fmt.Errorf("describe topic %s: %w", cfg.Topic, err)
	}
	end := map[int32]uint64{}
	res.Queues = len(ti.QueueInfo)
	for _, q := range ti.QueueInfo {
		end[q.Queue] = q.MaxOffset
		res.Available += q.MaxOffset - q.MinOffset
	}
	n := min(cfg.Consumers, len(ti.QueueInfo))
	for i := 0; i < n; i++ {
		cl, err := newClient(cfg.Servers, cfg.Timeout, cfg.TLS, cfg.Credentials)
		if err != nil {
			return rs, err
		}
		clients = append(clients, cl)
		// Learn the leader: without it "leader only" pulls go to the first
		// server of the list, whatever its role.
		cl.Status(ctx)
		cc := consumerConfig(cfg)
		r := &groupReader{end: map[int32]uint64{}}
		for q := i; q < len(ti.QueueInfo); q += n {
			qi := ti.QueueInfo[q].Queue
			cc.Queues = append(cc.Queues, qi)
			r.end[qi] = end[qi]
		}
		if r.cons, err = cl.NewConsumer(cc); err != nil {
			return rs, err
		}
		rs.readers = append(rs.readers, r)
	}
	return rs, nil
}

// clusterReader reads some groups of a cluster, alone in its consumer
// group on each.
type clusterReader struct {
	cons   *cluster.Consumer
	end    map[cluster.Queue]uint64
	served map[string]int // by "group/node"
}

func (r *clusterReader) poll(ctx context.Context) ([]client.Record, error) {
	recs, err := r.cons.Poll(ctx)
	if len(recs) == 0 {
		return nil, err
	}
	// Records handed out are read, whatever went wrong in another group.
	out := make([]client.Record, len(recs))
	for i := range recs {
		out[i] = recs[i].Record
		r.served[recs[i].Group+"/"+recs[i].ServedBy]++
	}
	return out, nil
}

// servedBy is read once the reader's worker has returned.
func (r *clusterReader) servedBy() map[string]int { return r.served }

func (r *clusterReader) caughtUp() bool { return !anyToRead(r.end) || r.cons.CaughtUp(r.end) }

// openClusterReaders describes the topic on every group that holds it into
// res and makes the readers: consumer i reads groups i, i+n, ... of them
// through its own cluster client.
func openClusterReaders(ctx context.Context, cfg *ConsumeConfig, res *ConsumeResult) (*readerSet, error) {
	var clusters []*cluster.Cluster
	var consumers []*cluster.Consumer
	rs := &readerSet{close: func() {
		for _, c := range consumers {
			cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			c.Close(cctx)
			cancel()
		}
		for _, c := range clusters {
			c.Close()
		}
	}}
	newCluster := func() (*cluster.Cluster, error) {
		c, err := newClusterClient(cfg.NameServers, cfg.Timeout, cfg.TLS, cfg.Credentials)
		if err == nil {
			clusters = append(clusters, c)
		}
		return c, err
	}
	admin, err := newCluster()
	if err != nil {
		return rs, err
	}
	rs.term = clusterTerm(admin)
	infos, err := admin.DescribeTopic(ctx, cfg.Topic)
	if err != nil {
		return rs, fmt.Errorf("describe topic %s: %w", cfg.Topic, err)
	}
	groups := make([]string, 0, len(infos))
	for g := range infos {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	end := map[cluster.Queue]uint64{}
	for _, g := range groups {
		for _, q := range infos[g].QueueInfo {
			end[cluster.Queue{Group: g, Queue: q.Queue}] = q.MaxOffset
			res.Available += q.MaxOffset - q.MinOffset
			res.Queues++
		}
	}
	n := min(cfg.Consumers, len(groups))
	for i := 0; i < n; i++ {
		cl, err := newCluster()
		if err != nil {
			return rs, err
		}
		r := &clusterReader{end: map[cluster.Queue]uint64{}, served: map[string]int{}}
		var mine []string
		for k := i; k < len(groups); k += n {
			mine = append(mine, groups[k])
		}
		for q, e := range end {
			if slices.Contains(mine, q.Group) {
				r.end[q] = e
			}
		}
		if r.cons, err = cl.NewConsumer(ctx, cluster.ConsumerConfig{Consumer: consumerConfig(cfg), Groups: mine}); err != nil {
			return rs, err
		}
		consumers = append(consumers, r.cons)
		rs.readers = append(rs.readers, r)
	}
	return rs, nil
}

// clusterTerm is the sum of the terms of the groups cl reaches, 0 when one
// does not answer.
func clusterTerm(cl *cluster.Cluster) func(ctx context.Context) uint64 {
	return func(ctx context.Context) uint64 {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		st, err := cl.Status(ctx)
		if err != nil {
			return 0
		}
		var sum uint64
		for _, g := range st {
			if g.Status == nil {
				return 0
			}
			sum += g.Status.Term
		}
		return sum
	}
}
