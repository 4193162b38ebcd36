package remoting

import (
	"sync"
	"sync/atomic"
	"time"

	rmq "github.com/raftmq/raftmq/remoting"
)

// notifier sends NOTIFY_CONSUMER_IDS_CHANGED (RocketMQ's
// Broker2Client.notifyConsumerIdsChanged): when a consumer group's members
// on this node change (a client id joins by its first heartbeat, or leaves
// by its connection's close or UNREGISTER_CLIENT), every connection of the
// group's members on this node is told, oneway, so the clients rebalance
// at once instead of at their 20 s timer. RocketMQ clients heartbeat every
// node of the group, so each node knows every member and tells the
// members connected to it; a member hears it from each node (a rebalance
// each, which changes nothing after the first).
//
// One goroutine (notifyLoop) sends; changes that come while it sends are
// gathered, so a burst of joins costs one notification per group. It also
// drops the members whose heartbeats stopped, every expiryScan, as
// RocketMQ's broker scans its channels, so that their group hears of it.
// Lock order: clients.mu, then notifier.mu (changed is called with the
// clients' lock held; notifyLoop never holds its own lock while it takes
// theirs).
type notifier struct {
	mu      sync.Mutex
	pending map[string]bool
	wake    chan struct{}
}

func newNotifier() *notifier {
	return &notifier{pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// changed records that group's members changed.
func (n *notifier) changed(group string) {
	n.mu.Lock()
	n.pending[group] = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

var notifyOpaque atomic.Int32

// expiryScan spaces the scans for members whose heartbeats stopped
// (RocketMQ's ClientHousekeepingService: 10 s).
const expiryScan = 10 * time.Second

// notifyLoop sends the pending notifications until the adapter stops.
func (a *Adapter) notifyLoop() {
	n := a.notify
	scan := time.NewTicker(expiryScan)
	defer scan.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-scan.C:
			a.consumers.expire()
			continue
		case <-n.wake:
		}
		n.mu.Lock()
		groups := n.pending
		n.pending = map[string]bool{}
		n.mu.Unlock()
		for g := range groups {
			for _, conn := range a.consumers.conns(g) {
				req := rmq.NewRequest(rmq.NotifyConsumerIdsChanged, map[string]string{"consumerGroup": g}, nil)
				req.Flag |= rmq.FlagOneway
				req.Opaque = notifyOpaque.Add(1)
				if err := conn.Send(req); err != nil {
					a.log.Debug("notify consumer ids changed: send failed", "group", g, "remote", conn.Remote, "error", err)
					continue
				}
				a.notified.Inc()
			}
			a.log.Debug("consumer group members changed; notified its connections", "group", g)
		}
	}
}

// conns returns the connections of group's live members (once each).
func (c *clients) conns(group string) []*rmq.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*rmq.Conn
	seen := map[*rmq.Conn]bool{}
	for _, id := range c.listLocked(group) {
		if conn := c.groups[group][id].conn; conn != nil && !seen[conn] {
			seen[conn] = true
			out = append(out, conn)
		}
	}
	return out
}

// connOf returns the connection of a live client by its id, in any group
// (nil: none), the one heard from last.
func (c *clients) connOf(client string) *rmq.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *member
	for _, g := range c.groups {
		if m := g[client]; m != nil && m.conn != nil && (best == nil || m.seen.After(best.seen)) {
			best = m
		}
	}
	if best == nil || best.seen.Before(time.Now().Add(-c.expiry)) {
		return nil
	}
	return best.conn
}
