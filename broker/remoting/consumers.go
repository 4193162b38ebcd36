package remoting

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/mq"
	rmq "github.com/raftmq/raftmq/remoting"
)

// clients is the clients of each group as this node's heartbeats show
// them: consumer groups (consumerDataSet) and producer groups
// (producerDataSet, the connections a transaction check-back can use).
// RocketMQ clients heartbeat every node of a group every 30 s and never
// unregister (the Go client), so a client leaves when its connection
// closes or its heartbeats stop.
type clients struct {
	mu     sync.Mutex
	expiry time.Duration
	groups map[string]map[string]*member // group -> client id -> member
	next   int                           // rotates pick over a group's clients
	// changed, when set, is called with a group whose members changed: a
	// client id joined, or left by its connection's close, by
	// unregistering or by its heartbeats' expiry (notify.go). It may be
	// called with mu held, so it must not take mu.
	changed func(group string)
}

type member struct {
	id   uint64    // connection id
	conn *rmq.Conn // nil in unit tests
	seen time.Time
	info clientInfo
}

// clientInfo is what a client's last heartbeat said of it in one group,
// for the admin tools' connection lists (stats.go).
type clientInfo struct {
	addr     string // the connection's remote address
	language string
	version  int32
	// A consumer's: its consumeType, messageModel, consumeFromWhere and
	// subscriptionDataSet (as the client sent them).
	consumeType, messageModel, consumeFromWhere string
	subscriptions                               []json.RawMessage
}

// memberView is one live client of a group.
type memberView struct {
	clientID string
	info     clientInfo
	conn     *rmq.Conn
}

// describe records info for a client heard in group (after heard).
func (c *clients) describe(group, client string, info clientInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m := c.groups[group][client]; m != nil {
		m.info = info
	}
}

// members returns group's live clients, by client id.
func (c *clients) members(group string) []memberView {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []memberView
	for _, id := range c.listLocked(group) {
		m := c.groups[group][id]
		out = append(out, memberView{clientID: id, info: m.info, conn: m.conn})
	}
	return out
}

// groupNames lists the groups with a live client.
func (c *clients) groupNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for g := range c.groups {
		if len(c.listLocked(g)) > 0 {
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out
}

func newClients(expiry time.Duration) *clients {
	return &clients{expiry: expiry, groups: map[string]map[string]*member{}}
}

// heard records a heartbeat on connection id; it reports whether the
// client is new or came on another connection, whose close must then drop
// it.
func (c *clients) heard(group, client string, id uint64, conn *rmq.Conn) (moved bool) {
	c.mu.Lock()
	g := c.groups[group]
	if g == nil {
		g = map[string]*member{}
		c.groups[group] = g
	}
	m := g[client]
	joined := m == nil || time.Since(m.seen) > c.expiry
	if m == nil {
		m = &member{}
		g[client] = m
	}
	moved = m.id != id
	m.id, m.conn, m.seen = id, conn, time.Now()
	c.mu.Unlock()
	if joined {
		c.notify([]string{group})
	}
	return moved
}

// closed drops the clients last heard on connection id.
func (c *clients) closed(id uint64) {
	c.mu.Lock()
	var left []string
	for gname, g := range c.groups {
		n := len(g)
		for client, m := range g {
			if m.id == id {
				delete(g, client)
			}
		}
		if len(g) < n {
			left = append(left, gname)
		}
		if len(g) == 0 {
			delete(c.groups, gname)
		}
	}
	c.mu.Unlock()
	c.notify(left)
}

func (c *clients) unregister(client string) {
	c.mu.Lock()
	var left []string
	for gname, g := range c.groups {
		if _, ok := g[client]; ok {
			delete(g, client)
			left = append(left, gname)
		}
	}
	c.mu.Unlock()
	c.notify(left)
}

func (c *clients) notify(groups []string) {
	if c.changed == nil {
		return
	}
	for _, g := range groups {
		c.changed(g)
	}
}

// list returns the ids of group's clients heard within the expiry, sorted,
// and forgets the others.
func (c *clients) list(group string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listLocked(group)
}

func (c *clients) listLocked(group string) []string {
	cut := time.Now().Add(-c.expiry)
	var ids []string
	for id, m := range c.groups[group] {
		if m.seen.Before(cut) {
			delete(c.groups[group], id)
			if c.changed != nil {
				c.changed(group) // takes only the notifier's lock
			}
			continue
		}
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// expire forgets the clients not heard within the expiry, in every group.
func (c *clients) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for g := range c.groups {
		if len(c.listLocked(g)) == 0 {
			delete(c.groups, g)
		}
	}
}

// pick returns the connection of a live client of group (nil: none), a
// different client each call when there are several.
func (c *clients) pick(group string) *rmq.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := c.listLocked(group)
	if len(ids) == 0 {
		return nil
	}
	c.next++
	return c.groups[group][ids[c.next%len(ids)]].conn
}

// heartbeatData is HEART_BEAT's body, the parts the broker uses.
type heartbeatData struct {
	ClientID     string `json:"clientID"`
	ConsumerData []struct {
		GroupName        string            `json:"groupName"`
		MessageModel     string            `json:"messageModel"`
		ConsumeType      string            `json:"consumeType"`
		ConsumeFromWhere string            `json:"consumeFromWhere"`
		Subscriptions    []json.RawMessage `json:"subscriptionDataSet"`
	} `json:"consumerDataSet"`
	ProducerData []struct {
		GroupName string `json:"groupName"`
	} `json:"producerDataSet"`
}

func (a *Adapter) heartbeat(ctx context.Context, conn *rmq.Conn, req *rmq.Command) *rmq.Command {
	var hb heartbeatData
	if err := json.Unmarshal(req.Body, &hb); err != nil {
		return rmq.Response(req, rmq.SystemError, "heartbeat body: "+err.Error())
	}
	if hb.ClientID == "" {
		return rmq.Response(req, rmq.SystemError, "heartbeat without a clientID")
	}
	for _, cd := range hb.ConsumerData {
		if cd.GroupName == "" {
			continue
		}
		if a.consumers.heard(cd.GroupName, hb.ClientID, conn.ID, conn) {
			id := conn.ID
			conn.OnClose(func() { a.consumers.closed(id) })
		}
		a.consumers.describe(cd.GroupName, hb.ClientID, clientInfo{addr: conn.Remote, language: req.Language, version: req.Version,
			consumeType: cd.ConsumeType, messageModel: cd.MessageModel, consumeFromWhere: cd.ConsumeFromWhere, subscriptions: cd.Subscriptions})
		if !strings.EqualFold(cd.MessageModel, "BROADCASTING") {
			a.ensureRetryTopic(ctx, cd.GroupName)
		}
	}
	for _, pd := range hb.ProducerData {
		if pd.GroupName == "" {
			continue
		}
		if a.producers.heard(pd.GroupName, hb.ClientID, conn.ID, conn) {
			id := conn.ID
			conn.OnClose(func() { a.producers.closed(id) })
		}
		a.producers.describe(pd.GroupName, hb.ClientID, clientInfo{addr: conn.Remote, language: req.Language, version: req.Version})
	}
	return rmq.Response(req, rmq.Success, "")
}

// ensureRetryTopic creates %RETRY%<group> with one queue, as RocketMQ's
// broker does on a clustering consumer's heartbeat (its push consumer
// subscribes to it by itself).
func (a *Adapter) ensureRetryTopic(ctx context.Context, group string) {
	topic := mq.RetryTopic(group)
	a.retryMu.Lock()
	done := a.retryMade[topic]
	a.retryMu.Unlock()
	if done {
		return
	}
	if _, err := a.b.Topic(topic); err != nil {
		if !a.reg.current().isLeader() {
			return // the client heartbeats the leader too, which creates it
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := a.b.CreateTopic(ctx, topic, 1, true); err != nil {
			a.log.Warn("create retry topic", "topic", topic, "error", err)
			return
		}
		a.reg.kickNow()
	}
	a.retryMu.Lock()
	a.retryMade[topic] = true
	a.retryMu.Unlock()
}

// createTopicOnLeader creates a client's topic (never a system topic) here
// or on the leader.
func (a *Adapter) createTopicOnLeader(ctx context.Context, topic string, queues int32) error {
	return a.onLeader(ctx, func(ctx context.Context) error {
		_, err := a.b.ClientCreateTopic(ctx, topic, queues, true)
		return err
	}, func(ctx context.Context, addr string) error {
		cc, err := a.peers.Conn(addr)
		if err != nil {
			return err
		}
		_, err = api.NewBrokerClient(cc).CreateTopic(ctx, &api.CreateTopicRequest{Name: topic, Queues: queues, IfNotExists: true})
		return err
	})
}

func (a *Adapter) consumerList(req *rmq.Command) *rmq.Command {
	ids := a.consumers.list(req.Ext["consumerGroup"])
	if ids == nil {
		ids = []string{}
	}
	body, _ := json.Marshal(map[string][]string{"consumerIdList": ids})
	resp := rmq.Response(req, rmq.Success, "")
	resp.Body = body
	return resp
}
