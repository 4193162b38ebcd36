package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/client/cluster"
)

// sendFunc queues msgs and calls done once, with the group that
// acknowledged each message (nil for a run on one group) or the error.
type sendFunc func(ctx context.Context, msgs []client.Message, done func(groups []string, err error))

// producerSet is the producers of a run, warmed up, and what the run reads
// of the group or groups behind them.
type producerSet struct {
	sends  []sendFunc
	queues int                              // of the topic, over every group
	term   func(ctx context.Context) uint64 // the sum of the groups' terms; 0 when one did not answer
	close  func()
}

// openGroup makes cfg.Producers producers of the group at cfg.Servers, each
// with its own connection, and creates the topic when it is missing. Each
// producer learns the leader and sends warm before the clock starts.
func openGroup(ctx context.Context, cfg *ProduceConfig, warm client.Message) (*producerSet, error) {
	var clients []*client.Client
	ps := &producerSet{close: func() {
		for _, c := range clients {
			c.Close()
		}
	}}
	for i := 0; i < cfg.Producers; i++ {
		c, err := newClient(cfg.Servers, cfg.Timeout, cfg.TLS, cfg.Credentials)
		if err != nil {
			return ps, err
		}
		clients = append(clients, c)
	}
	nq, err := ensureTopic(ctx, clients[0], cfg.Topic, cfg.Queues)
	if err != nil {
		return ps, err
	}
	ps.queues = nq
	for _, c := range clients {
		// Learn the leader first: the SDK otherwise sends to the first
		// server of the list, and a follower there forwards every request.
		c.Status(ctx)
		p := c.NewProducer()
		// Warm up outside the clock: find the leader, dial it.
		if _, err := p.Send(ctx, cfg.Topic, warm); err != nil {
			return ps, fmt.Errorf("warm-up send: %w", err)
		}
		ps.sends = append(ps.sends, func(ctx context.Context, msgs []client.Message, done func([]string, error)) {
			p.SendAsyncContext(ctx, cfg.Topic, msgs, func(_ []*api.Ack, err error) { done(nil, err) })
		})
	}
	first := clients[0]
	ps.term = func(ctx context.Context) uint64 { return term(ctx, first) }
	return ps, nil
}

// defaultClusterQueues is each group's queue count of a topic a run over
// name servers creates when cfg.Queues is 0.
const defaultClusterQueues = 4

// openCluster makes cfg.Producers cluster producers through the name
// servers, each with its own connections, and creates the topic on every
// group with a leader when no group holds it. Each producer sends warm
// before the clock starts.
func openCluster(ctx context.Context, cfg *ProduceConfig, warm client.Message) (*producerSet, error) {
	var clusters []*cluster.Cluster
	var producers []*cluster.Producer
	ps := &producerSet{close: func() {
		for _, p := range producers {
			p.Close()
		}
		for _, c := range clusters {
			c.Close()
		}
	}}
	for i := 0; i < cfg.Producers; i++ {
		c, err := newClusterClient(cfg.NameServers, cfg.Timeout, cfg.TLS, cfg.Credentials)
		if err != nil {
			return ps, err
		}
		clusters = append(clusters, c)
	}
	cl := clusters[0]
	infos, err := cl.DescribeTopic(ctx, cfg.Topic)
	if err == nil && len(infos) > 0 {
		for _, ti := range infos {
			ps.queues += len(ti.QueueInfo)
		}
	} else {
		groups, err := cl.Refresh(ctx)
		if err != nil {
			return ps, err
		}
		led := 0
		for _, g := range groups {
			if g.Leader != "" {
				led++
			}
		}
		perGroup := int(cfg.Queues)
		if perGroup == 0 {
			perGroup = defaultClusterQueues
		}
		made, err := cl.CreateTopic(ctx, cfg.Topic, perGroup*max(led, 1), nil, true)
		if err != nil {
			return ps, fmt.Errorf("create topic %s: %w", cfg.Topic, err)
		}
		for _, n := range made {
			ps.queues += n
		}
		// The producers route by what the name servers list: wait until
		// they list the topic on every group it was created on.
		for {
			r, err := cl.Route(ctx, cfg.Topic)
			if err == nil && len(r.Groups) >= len(made) {
				break
			}
			select {
			case <-ctx.Done():
				return ps, fmt.Errorf("topic %s created on %d groups; the name servers list it on fewer: %w", cfg.Topic, len(made), ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	for _, c := range clusters {
		p := c.NewProducer(client.DefaultProducerConfig())
		producers = append(producers, p)
		if _, err := p.Send(ctx, cfg.Topic, cluster.Message{Message: warm}); err != nil {
			return ps, fmt.Errorf("warm-up send: %w", err)
		}
		ps.sends = append(ps.sends, func(ctx context.Context, msgs []client.Message, done func([]string, error)) {
			cm := make([]cluster.Message, len(msgs))
			for i := range msgs {
				cm[i].Message = msgs[i]
			}
			// The cluster producer has no asynchronous send; the client
			// producer under it coalesces concurrent Sends all the same.
			go func() {
				acks, err := p.Send(ctx, cfg.Topic, cm...)
				groups := make([]string, len(acks))
				for i, a := range acks {
					groups[i] = a.Group
				}
				done(groups, err)
			}()
		})
	}
	ps.term = clusterTerm(cl)
	return ps, nil
}
