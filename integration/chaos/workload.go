package chaos

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Workload parameters.
type Workload struct {
	Pad     int // bytes added to every body (beyond 0-63 random ones)
	Topic   string
	Queues  int32
	Servers []string
	// Workers is the number of producers; each sends one request at a time.
	Workers int
	// OpTimeout bounds one Send with all its retries; past it the outcome
	// is unknown.
	OpTimeout time.Duration
	// Think is the pause between two requests of a worker.
	Think time.Duration
	// Rich makes the producers send what applications send besides plain
	// bodies: tags, properties, binary bodies, and now and then a key of
	// 16 KiB, 128 properties, a property of 16 KiB, a tag of 255 bytes (each
	// at its limit) and requests of hundreds of messages.
	Rich bool
	// SendBackGroup, with Rich, names the consumer group whose consumer
	// sends one message in 25 back ("consume later" with delay level 1; one
	// in four of those straight to the dead letters).
	SendBackGroup string
	// Transactions is the number of transactional producers
	// (RunTxnProducer).
	Transactions int

	txnFinal sync.Map // message name -> its client's decision (history.TxnCommit or TxnRollback)
}

// Limits of one produce request (broker/produce.go): the workload sends
// messages at them and, with RunOddities, just over them.
const (
	limitKey          = 16 << 10
	limitTag          = 255
	limitProperties   = 128
	limitPropertyLen  = 16 << 10 // name + value
	limitMessages     = 65536
	limitBody         = 4 << 20                       // --max-message-bytes default
	limitRequestBytes = broker.DefaultMaxRequestBytes // --max-request-bytes default: the request as the log encodes it
)

// body builds a message body: the unique name, "|", and filler of pad bytes.
func body(name string, pad int) []byte {
	b := make([]byte, 0, len(name)+1+pad)
	b = append(b, name...)
	b = append(b, '|')
	for len(b) < len(name)+1+pad {
		b = append(b, "0123456789abcdefghijklmnopqrstuvwxyz"...)
	}
	return b[:len(name)+1+pad]
}

// RunProducer sends requests until ctx ends: 1-3 messages each, most with
// one of the worker's keys (per-key order is checked), some with no key
// (round robin), some to an explicit queue, and one in fifty to a queue
// that does not exist (a definite failure). One in five gives up early.
// Every request is recorded.
func (w *Workload) RunProducer(ctx context.Context, worker int, rng *rand.Rand, rec *history.Recorder) error {
	cl, err := client.New(client.Config{Servers: w.Servers, RequestTimeout: 2 * time.Second, RetryTimeout: w.OpTimeout})
	if err != nil {
		return err
	}
	defer cl.Close()
	p := cl.NewProducer()
	name := fmt.Sprintf("w%d", worker)
	for seq := uint64(1); ctx.Err() == nil; seq++ {
		n := 1 + rng.Intn(3)
		if w.Rich && rng.Intn(100) == 0 {
			n = 100 + rng.Intn(900) // a request of many messages
		}
		op := history.Op{Worker: name, Producer: p.ID(), Seq: seq}
		msgs := make([]client.Message, n)
		invalid := rng.Intn(50) == 0
		for i := range msgs {
			bname := fmt.Sprintf("%s-%06d-%d", name, seq, i)
			b := body(bname, w.Pad+rng.Intn(64))
			if w.Rich && rng.Intn(4) == 0 {
				b = binaryBody(bname, w.Pad+rng.Intn(256), rng)
			}
			sm := history.SentMessage{Body: bname, Hash: history.BodyHash(b), Queue: -1}
			m := client.Message{Body: b}
			switch r := rng.Intn(10); {
			case invalid && i == 0:
				q := w.Queues + 95
				m.Queue, sm.Queue = &q, q
			case r < 7:
				m.Key = fmt.Sprintf("%s.k%d", name, rng.Intn(3))
				sm.Key = m.Key
			case r < 9:
			default:
				q := int32(rng.Intn(int(w.Queues)))
				m.Queue, sm.Queue = &q, q
			}
			if w.Rich {
				richMessage(&m, &sm, bname, rng)
			}
			msgs[i] = m
			op.Messages = append(op.Messages, sm)
		}
		// With Rich, one request in twelve is delayed: by level 1 (1 s) or
		// to a time 0.2-2.5 s ahead. Its messages appear in the topic only
		// then, once each (waitDelayed in the runner gives them the time).
		if w.Rich && rng.Intn(12) == 0 {
			op.Delayed = true
			at := time.Now().Add(time.Duration(200+rng.Intn(2300)) * time.Millisecond)
			byLevel := rng.Intn(2) == 0
			for i := range msgs {
				if byLevel {
					msgs[i].DelayLevel = 1
				} else {
					msgs[i].DeliverAt = at
				}
			}
		}
		// One request in five has a short deadline: during a failover it
		// gives up while the request may still commit (an unknown outcome).
		timeout := w.OpTimeout
		if rng.Intn(5) == 0 {
			timeout = time.Duration(300+rng.Intn(1200)) * time.Millisecond
		}
		w.send(p, &op, msgs, timeout, rec)
		if op.Outcome == history.OutcomeOK && len(op.Acks) == 0 {
			op.Error = "acknowledged without acks"
		}
		rec.AddOp(op)
		if w.Think > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(w.Think):
			}
		}
	}
	return nil
}

// binaryBody is the unique name, "|" and n random bytes (any byte value).
func binaryBody(name string, n int, rng *rand.Rand) []byte {
	b := make([]byte, len(name)+1+n)
	copy(b, name)
	b[len(name)] = '|'
	rng.Read(b[len(name)+1:])
	return b
}

// richMessage gives a message a tag and properties as applications do, and
// now and then one field at its limit: a 16 KiB key (unique, so per-key
// order is not involved), 128 properties, one property of 16 KiB, a tag of
// 255 bytes.
func richMessage(m *client.Message, sm *history.SentMessage, name string, rng *rand.Rand) {
	switch r := rng.Intn(400); {
	case r == 0 && m.Queue == nil:
		m.Key = padTo(name+".bigkey.", limitKey)
	case r == 1:
		m.Properties = map[string]string{}
		for i := 0; i < limitProperties; i++ {
			m.Properties[fmt.Sprintf("p%03d", i)] = fmt.Sprintf("%s-%d", name, i)
		}
	case r == 2:
		m.Properties = map[string]string{"big": padTo(name, limitPropertyLen-len("big"))}
	case r == 3:
		m.Tag = padTo(name+".tag.", limitTag)
	case r < 150:
		m.Tag = []string{"TagA", "TagB", "tag-" + name[:2]}[rng.Intn(3)]
	}
	if m.Properties == nil && rng.Intn(3) == 0 {
		m.Properties = map[string]string{"trace": name, "n": fmt.Sprint(rng.Intn(1000))}
		if rng.Intn(2) == 0 {
			// Any UTF-8 (proto3 strings must be): NUL, control, non-ASCII.
			m.Properties["bin"] = "\x00\x01é世" + string(rune(0x80+rng.Intn(0x700)))
		}
	}
	sm.Key, sm.Tag, sm.Props = m.Key, m.Tag, history.PropsHash(m.Properties)
}

// padTo returns s extended (or cut) to exactly n bytes.
func padTo(s string, n int) string {
	b := []byte(s)
	for len(b) < n {
		b = append(b, "0123456789abcdefghijklmnopqrstuvwxyz"...)
	}
	return string(b[:n])
}

// RunBulk sends large messages (bodies of size bytes, several per request)
// until total bytes are acknowledged, the deadline passes or ctx ends; they
// are recorded like any others. The full-disk fault uses it to make every
// node roll over to a new log segment.
func (w *Workload) RunBulk(ctx context.Context, name string, size, perOp int, total int64, rec *history.Recorder) (acked int64) {
	cl, err := client.New(client.Config{Servers: w.Servers, RequestTimeout: 5 * time.Second, RetryTimeout: w.OpTimeout})
	if err != nil {
		return 0
	}
	defer cl.Close()
	p := cl.NewProducer()
	for seq := uint64(1); ctx.Err() == nil && acked < total; seq++ {
		op := history.Op{Worker: name, Producer: p.ID(), Seq: seq}
		msgs := make([]client.Message, perOp)
		for i := range msgs {
			bname := fmt.Sprintf("%s-%06d-%d", name, seq, i)
			b := body(bname, size)
			q := int32((int(seq)*perOp + i) % int(w.Queues))
			msgs[i] = client.Message{Body: b, Queue: &q}
			op.Messages = append(op.Messages, history.SentMessage{Body: bname, Hash: history.BodyHash(b), Queue: q})
		}
		if w.send(p, &op, msgs, w.OpTimeout, rec) == nil {
			acked += int64(size * perOp)
		}
		rec.AddOp(op)
	}
	return acked
}

// send sends msgs to the topic with the given deadline and fills in op's
// times, outcome, error and acks.
func (w *Workload) send(p *client.Producer, op *history.Op, msgs []client.Message, timeout time.Duration, rec *history.Recorder) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	op.Invoke = rec.Now()
	acks, err := p.Send(ctx, w.Topic, msgs...)
	op.Complete = rec.Now()
	op.Outcome = history.Classify(err)
	if err != nil {
		op.Error = err.Error()
	}
	for _, a := range acks {
		op.Acks = append(op.Acks, history.Ack{Queue: a.Queue, Offset: a.Offset, ID: a.Id, DeliverAt: a.DeliverAtMs})
	}
	return err
}

// sendBack hands m back to group ("consume later": delay level 1, or the
// dead letters at once) and records what the broker answered.
func (w *Workload) sendBack(ctx context.Context, cl *client.Client, consumer, group string, m *api.Message, dlq bool, rec *history.Recorder) {
	level := int32(1)
	if dlq {
		level = -1
	}
	sb := history.SendBack{Consumer: consumer, Group: group, ID: m.Id, Body: history.BodyName(m.Body), Hash: history.BodyHash(m.Body), DLQ: dlq}
	sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	sb.Invoke = rec.Now()
	resp, err := cl.SendBack(sctx, group, m.Id, level, 0)
	sb.Complete = rec.Now()
	sb.Outcome = history.Classify(err)
	if err != nil {
		sb.Error = err.Error()
	} else {
		sb.CopyID, sb.CopyTopic, sb.DeadLettered, sb.DeliverAt = resp.Id, resp.Topic, resp.DeadLettered, resp.DeliverAtMs
	}
	rec.AddSendBack(sb)
}

// maxDelay bounds how long after it was sent a delayed message of the
// workload is due (level 1 is 1 s; deliver-at times are at most 2.5 s ahead).
const maxDelay = 2500 * time.Millisecond

// delayedDue is the latest time a delayed message of the history may be
// due: its acked delivery time, or for a request without acks its send time
// plus maxDelay.
func delayedDue(h *history.History) time.Time {
	var due time.Time
	start := time.UnixMilli(h.Start)
	for _, op := range h.Ops {
		if !op.Delayed {
			continue
		}
		t := start.Add(op.Invoke + maxDelay)
		for _, a := range op.Acks {
			if at := time.UnixMilli(a.DeliverAt); a.DeliverAt != 0 && at.After(t) {
				t = at
			}
		}
		if t.After(due) {
			due = t
		}
	}
	for _, sb := range h.SendBacks {
		t := start.Add(sb.Invoke + maxDelay)
		if at := time.UnixMilli(sb.DeliverAt); sb.DeliverAt != 0 && at.After(t) {
			t = at
		}
		if t.After(due) {
			due = t
		}
	}
	return due
}

// RunConsumer polls until ctx ends and records every message received.
func (w *Workload) RunConsumer(ctx context.Context, name string, cfg client.ConsumerConfig, rec *history.Recorder) error {
	cl, err := client.New(client.Config{Servers: w.Servers, RequestTimeout: 2 * time.Second, RetryTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer cl.Close()
	cons, err := cl.NewConsumer(cfg)
	if err != nil {
		return err
	}
	sendBacks := w.Rich && w.SendBackGroup != "" && cfg.Group == w.SendBackGroup
	rng := rand.New(rand.NewSource(int64(history.BodyHash([]byte(name)))))
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		recs, err := cons.Poll(pctx)
		cancel()
		// Every record of a poll was served when it returned; a send-back
		// below may wait out a leader election before the next is looked at.
		at := rec.Now()
		for _, r := range recs {
			rec.AddDelivery(history.Delivery{Consumer: name, Queue: r.Queue, Offset: r.Offset, ID: r.Id, Body: history.BodyName(r.Body),
				Hash: history.BodyHash(r.Body), ServedBy: r.ServedBy, ServedByLeader: r.ServedByLeader, At: at})
			if sendBacks && rng.Intn(25) == 0 {
				w.sendBack(ctx, cl, name, cfg.Group, r.Message, rng.Intn(4) == 0, rec)
			}
		}
		if err != nil && len(recs) == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cons.Close(cctx)
	return nil
}

// ReadNode reads every queue of topic from one node, pinned to it: raw
// Pull calls against its address, so whatever it serves comes from its own
// log whatever its role.
//
// It reads each queue from its offset in from (the retained minimum). With
// retention, where the node does not hold a message's body (it installed a
// snapshot after retention deleted the entries before it), it skips to the
// next offset: the node's log is then a suffix of the group's. Without, that
// is an error.
func ReadNode(ctx context.Context, addr, topic string, from map[int32]uint64, retention bool) (history.QueueLog, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(128<<20)))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	defer cc.Close()
	bc := api.NewBrokerClient(cc)
	out := history.QueueLog{}
	for q, start := range from {
		var entries []history.LogEntry
		offset := start
		retries := 0
		for iter := 0; ; iter++ {
			if iter > 100000 {
				return nil, fmt.Errorf("queue %d: too many pulls", q)
			}
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			r, err := bc.Pull(pctx, &api.PullRequest{Topic: topic, Queue: q, Offset: offset, MaxMessages: 4096, MaxBytes: 8 << 20})
			cancel()
			if err != nil {
				if retries < 30 && client.Retryable(err) {
					retries++
					time.Sleep(200 * time.Millisecond)
					continue
				}
				return nil, fmt.Errorf("queue %d offset %d: %w", q, offset, err)
			}
			switch r.Status {
			case api.PullStatus_PULL_STATUS_FOUND:
				for _, m := range r.Messages {
					entries = append(entries, history.Entry(m))
				}
				if r.NextOffset <= offset {
					return nil, fmt.Errorf("queue %d: pull at %d returned next offset %d", q, offset, r.NextOffset)
				}
				offset = r.NextOffset
				retries = 0
				continue
			case api.PullStatus_PULL_STATUS_NO_NEW:
			case api.PullStatus_PULL_STATUS_RETRY_ELSEWHERE:
				if retention && r.Suggestion != nil && len(entries) == 0 && (r.Suggestion.Code == api.SuggestionReason_SUGGESTION_REASON_NOT_HELD || r.Suggestion.Code == api.SuggestionReason_SUGGESTION_REASON_LEADER_DELETED) {
					offset++ // not held here: the node's log starts later
					continue
				}
				if retries < 30 {
					retries++
					time.Sleep(200 * time.Millisecond)
					continue
				}
				reason := ""
				if r.Suggestion != nil {
					reason = r.Suggestion.Code.String()
				}
				return nil, fmt.Errorf("queue %d: node does not serve offset %d (%s)", q, offset, reason)
			default:
				return nil, fmt.Errorf("queue %d offset %d: pull status %s", q, offset, r.Status)
			}
			break
		}
		out[q] = entries
	}
	return out, nil
}

// ReadAll consumes the whole topic from earliest with a fresh consumer
// group (following the read-routing suggestions) up to the end offsets the
// leader reports, and returns what it got per queue in delivery order.
func ReadAll(ctx context.Context, servers []string, topic, group string) (history.QueueLog, error) {
	cl, err := client.New(client.Config{Servers: servers, RequestTimeout: 5 * time.Second, RetryTimeout: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ti, err := cl.DescribeTopic(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe topic: %w", err)
	}
	end := map[int32]uint64{}
	for _, qi := range ti.QueueInfo {
		end[qi.Queue] = qi.MaxOffset
	}
	cfg := client.DefaultConsumerConfig(topic, group)
	cfg.CommitInterval = 0
	cfg.Wait = 200 * time.Millisecond
	cons, err := cl.NewConsumer(cfg)
	if err != nil {
		return nil, err
	}
	out := history.QueueLog{}
	for q := range end {
		out[q] = nil
	}
	deadline := time.Now().Add(90 * time.Second)
	var lastErr error
	for !cons.CaughtUp(end) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			var got []string
			for q, n := range end {
				got = append(got, fmt.Sprintf("q%d %d/%d", q, len(out[q]), n))
			}
			sort.Strings(got)
			return out, fmt.Errorf("not caught up after 90s (%s); last error: %v", strings.Join(got, " "), lastErr)
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		recs, err := cons.Poll(pctx)
		cancel()
		if err != nil {
			lastErr = err
			time.Sleep(100 * time.Millisecond)
		}
		for _, r := range recs {
			out[r.Queue] = append(out[r.Queue], history.Entry(r.Message))
		}
	}
	return out, nil
}

// Oddities are the hand-made requests of RunOddities.
type Oddities struct {
	// OverLimit sends requests just over each limit of a produce request
	// (and one at the limit of a request's bodies): each must be refused
	// with a definite error and nothing of it stored.
	OverLimit bool
	// ReusedSeq sends a request, then another with the same producer id and
	// sequence but other content: the broker must refuse the second (its
	// ack would name messages it does not hold).
	ReusedSeq bool
	// Start is the first of OddityShapes request shapes that OverLimit
	// sends (0: the one at the limit); they then go round.
	Start int
}

// OddityShapes is the number of request shapes OverLimit goes round: one
// at the limit and one per limit it goes over.
func OddityShapes() int { return len(overLimits()) + 1 }

// rawClient sends hand-made produce requests to any node (a follower
// forwards them to the leader).
type rawClient struct {
	conns   []*grpc.ClientConn
	clients []api.BrokerClient
}

func newRawClient(servers []string) (*rawClient, error) {
	rc := &rawClient{}
	for _, a := range servers {
		cc, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(api.MaxMessageSize), grpc.MaxCallRecvMsgSize(api.MaxMessageSize)))
		if err != nil {
			rc.close()
			return nil, fmt.Errorf("dial %s: %w", a, err)
		}
		rc.conns = append(rc.conns, cc)
		rc.clients = append(rc.clients, api.NewBrokerClient(cc))
	}
	return rc, nil
}

func (rc *rawClient) close() {
	for _, cc := range rc.conns {
		cc.Close()
	}
}

// produce sends req to the nodes in turn until one answers or refuses it
// definitely, or timeout passes, and fills in op.
func (rc *rawClient) produce(req *api.ProduceRequest, op *history.Op, timeout time.Duration, rec *history.Recorder) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	op.Invoke = rec.Now()
	var err error
	for i := 0; ctx.Err() == nil; i++ {
		actx, acancel := context.WithTimeout(ctx, 5*time.Second)
		var resp *api.ProduceResponse
		resp, err = rc.clients[i%len(rc.clients)].Produce(actx, req)
		acancel()
		if err == nil {
			op.Outcome, op.Duplicate = history.OutcomeOK, resp.Duplicate
			for _, a := range resp.Acks {
				op.Acks = append(op.Acks, history.Ack{Queue: a.Queue, Offset: a.Offset, ID: a.Id})
			}
			op.Complete = rec.Now()
			return
		}
		if history.Classify(err) == history.OutcomeFail {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	op.Complete = rec.Now()
	op.Outcome = history.Classify(err)
	if err != nil {
		op.Error = err.Error()
	}
}

// oddityTimeout bounds a hand-made request with all its attempts (5 s each).
const oddityTimeout = 16 * time.Second

// overLimit is one request just over a limit.
type overLimit struct {
	what string
	make func(name string) []*api.ProduceMessage
}

func overLimits() []overLimit {
	one := func(f func(m *api.ProduceMessage)) func(string) []*api.ProduceMessage {
		return func(name string) []*api.ProduceMessage {
			m := &api.ProduceMessage{Body: body(name+"-0", 16)}
			f(m)
			return []*api.ProduceMessage{m}
		}
	}
	return []overLimit{
		{"key of 16 KiB + 1", one(func(m *api.ProduceMessage) { m.Key = padTo("k", limitKey+1) })},
		{"tag of 256 bytes", one(func(m *api.ProduceMessage) { m.Tag = padTo("t", limitTag+1) })},
		{"129 properties", one(func(m *api.ProduceMessage) {
			m.Properties = map[string]string{}
			for i := 0; i <= limitProperties; i++ {
				m.Properties[fmt.Sprintf("p%03d", i)] = "v"
			}
		})},
		{"property of 16 KiB + 1", one(func(m *api.ProduceMessage) { m.Properties = map[string]string{"p": padTo("v", limitPropertyLen)} })},
		{"body of 4 MiB + 1", func(name string) []*api.ProduceMessage {
			n := name + "-0"
			return []*api.ProduceMessage{{Body: body(n, limitBody-len(n))}} // len(n) + 1 + pad bytes
		}},
		{"65537 messages", func(name string) []*api.ProduceMessage {
			ms := make([]*api.ProduceMessage, limitMessages+1)
			for i := range ms {
				ms[i] = &api.ProduceMessage{Body: []byte(fmt.Sprintf("%s-%d", name, i))}
			}
			return ms
		}},
		// Every field within its limit, but the request as a whole over
		// the request bound: keys and properties count too.
		{"keys of 17 MiB in one request", keysOf(17 << 20)},
		// Larger than one 64 MiB log segment, and than what gRPC reads.
		{"keys of 72 MiB in one request", keysOf(72 << 20)},
		{"request of 16 MiB + 1 as the log encodes it", func(name string) []*api.ProduceMessage {
			return bodiesEncodingTo(name, limitRequestBytes+1, exactSize)
		}},
		{"bodies of 36 MiB", func(name string) []*api.ProduceMessage {
			ms := make([]*api.ProduceMessage, 9)
			for i := range ms {
				ms[i] = &api.ProduceMessage{Body: body(fmt.Sprintf("%s-%d", name, i), limitBody-64)}
			}
			return ms
		}},
	}
}

// keysOf is a request of 16 KiB keys adding up to n bytes.
func keysOf(n int) func(string) []*api.ProduceMessage {
	return func(name string) []*api.ProduceMessage {
		ms := make([]*api.ProduceMessage, n/limitKey)
		for i := range ms {
			m := fmt.Sprintf("%s-%d", name, i)
			ms[i] = &api.ProduceMessage{Body: []byte(m), Key: padTo(m+".", limitKey)}
		}
		return ms
	}
}

// exactSize is at most the bytes msgs take in a log entry (raftlog's
// batch encoding, queues below 128) whatever the producer id and topic
// (counted empty): a request it puts over --max-request-bytes is over.
func exactSize(msgs []*api.ProduceMessage) int {
	return encodedSize(msgs, "", 0, 0)
}

// boundSize is at least the size the broker's edge check
// (broker.ValidateProduce) computes before the queue is known, with the
// widest queue number and count, for a producer id and topic of up to 64
// bytes each: a request it puts within --max-request-bytes is within.
func boundSize(msgs []*api.ProduceMessage) int {
	return encodedSize(msgs, strings.Repeat("x", 64), store.MaxQueues-1, 9)
}

func encodedSize(msgs []*api.ProduceMessage, ids string, queue uint32, extra int) int {
	r := raftlog.Request{ProducerID: ids, Seq: 1, Topic: ids}
	now := time.Now().UnixMilli()
	for _, m := range msgs {
		r.Messages = append(r.Messages, raftlog.Message{Queue: queue, Timestamp: now, Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: m.Body})
	}
	return r.EncodedSize() + extra
}

// bodiesEncodingTo is a request of bodies of at most limitBody bytes whose
// size, as size counts it, is target.
func bodiesEncodingTo(name string, target int, size func([]*api.ProduceMessage) int) []*api.ProduceMessage {
	var ms []*api.ProduceMessage
	for i := 0; ; i++ {
		n := fmt.Sprintf("%s-%d", name, i)
		ms = append(ms, &api.ProduceMessage{Body: body(n, limitBody-len(n)-1)})
		if s := size(ms); s >= target {
			last := ms[len(ms)-1]
			last.Body = last.Body[:len(last.Body)-(s-target)]
			// The body's length prefix may have shrunk by a byte.
			for size(ms) < target {
				last.Body = append(last.Body, '0')
			}
			return ms
		}
	}
}

// atLimit is a request that the broker's own bound counts at 64 bytes
// under --max-request-bytes (16 MiB): it must be acknowledged and stored
// like any other.
func atLimit(name string) []*api.ProduceMessage {
	return bodiesEncodingTo(name, limitRequestBytes-64, boundSize)
}

// RunOddities sends the hand-made requests that o enables, one about every
// interval, until ctx ends. They are recorded like the producers' requests,
// marked with their Kind.
func (w *Workload) RunOddities(ctx context.Context, o Oddities, seed int64, interval time.Duration, rec *history.Recorder) error {
	if !o.OverLimit && !o.ReusedSeq {
		return nil
	}
	rc, err := newRawClient(w.Servers)
	if err != nil {
		return err
	}
	defer rc.close()
	limits := overLimits()
	// One request every interval, on a fixed schedule: a slow one (16 MiB
	// on a loaded machine) is followed by the next at once, so a run sends
	// as many as its length allows however long each takes.
	next := time.Now()
	for n := 0; ctx.Err() == nil; n++ {
		next = next.Add(interval)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Until(next)):
		}
		pid := fmt.Sprintf("odd-%d-%d", seed, n)
		if o.OverLimit && (!o.ReusedSeq || n%2 == 0) {
			k := n
			if o.ReusedSeq {
				k = n / 2
			}
			k = (k + o.Start) % (len(limits) + 1)
			name := fmt.Sprintf("x%d-%06d", seed%1000, n)
			var l overLimit
			var msgs []*api.ProduceMessage
			var op history.Op
			if k == 0 {
				l.what = "request of 16 MiB less 64 bytes as the broker counts it, at the limit"
				msgs = atLimit(name)
				op = history.Op{Worker: "at-limit", Producer: pid, Seq: 1, Kind: history.KindAtLimit}
			} else {
				l = limits[k-1]
				msgs = l.make(name)
				op = history.Op{Worker: "over-limit", Producer: pid, Seq: 1, Kind: history.KindOverLimit}
			}
			for i, m := range msgs {
				op.Messages = append(op.Messages, history.SentMessage{Body: history.BodyName(m.Body), Hash: history.BodyHash(m.Body), Key: m.Key, Tag: m.Tag,
					Props: history.PropsHash(m.Properties), Queue: -1})
				if i >= 16 {
					break // the names of the first ones are enough to find any of it in the log
				}
			}
			// Each attempt may meet a paused or cut-off node and take its 5 s:
			// time for three, so one reaches a node that answers the refusal.
			rc.produce(&api.ProduceRequest{Topic: w.Topic, ProducerId: pid, Sequence: 1, Messages: msgs}, &op, max(w.OpTimeout, oddityTimeout), rec)
			if op.Error != "" {
				op.Error = l.what + ": " + op.Error
			}
			rec.AddOp(op)
			continue
		}
		// A sequence reused with other content: the first request is an
		// ordinary one; the second names other bodies.
		for k, kind := range []string{"", history.KindReusedSeq} {
			var msgs []*api.ProduceMessage
			op := history.Op{Worker: fmt.Sprintf("reuse%d", k), Producer: pid, Seq: 1, Kind: kind}
			for i := 0; i < 2; i++ {
				name := fmt.Sprintf("r%d-%06d-%d-%d", seed%1000, n, k, i)
				b := body(name, 8)
				msgs = append(msgs, &api.ProduceMessage{Body: b, Tag: fmt.Sprint("v", k)})
				op.Messages = append(op.Messages, history.SentMessage{Body: name, Hash: history.BodyHash(b), Tag: fmt.Sprint("v", k), Queue: -1})
			}
			rc.produce(&api.ProduceRequest{Topic: w.Topic, ProducerId: pid, Sequence: 1, Messages: msgs}, &op, w.OpTimeout, rec)
			rec.AddOp(op)
			if k == 0 && op.Outcome != history.OutcomeOK {
				break // the first did not (surely) land: a reuse proves nothing
			}
		}
	}
	return nil
}

// TxnGroup is the producer group of the workload's transactions.
const TxnGroup = "chaos-txn"

// Check-back timing of the transactional producers: a half message left
// undecided is answered for within about 1.5 s, well inside a run.
const (
	txnTimeout       = time.Second
	txnCheckInterval = 500 * time.Millisecond
)

// RunTxnProducer sends one message per transaction until ctx ends. Each
// transaction's decision is drawn before it is sent: the local transaction
// answers commit, rollback or unknown, one in three each; for unknown the
// check-back's answer (commit or rollback) is decided then too, so the
// client's decision is known whichever way it reaches the group. Keys and
// properties as the other producers send them. Every transaction is
// recorded with its decisions; the check-back's answers are recorded as
// they are given.
func (w *Workload) RunTxnProducer(ctx context.Context, worker int, rng *rand.Rand, rec *history.Recorder) error {
	cl, err := client.New(client.Config{Servers: w.Servers, RequestTimeout: 2 * time.Second, RetryTimeout: w.OpTimeout})
	if err != nil {
		return err
	}
	defer cl.Close()
	tp, err := cl.NewTransactionProducer(client.TransactionConfig{Group: TxnGroup, Check: w.txnCheck(rec), Timeout: txnTimeout,
		CheckInterval: txnCheckInterval, Topics: []string{w.Topic}})
	if err != nil {
		return err
	}
	defer tp.Close()
	name := fmt.Sprintf("t%d", worker)
	for seq := uint64(1); ctx.Err() == nil; seq++ {
		bname := fmt.Sprintf("%s-%06d-0", name, seq)
		m, sm, tx := drawTxn(rng, name, bname, w.Pad, TxnGroup)
		w.txnFinal.Store(bname, tx.Final)
		op := history.Op{Worker: name, Producer: tp.ID(), Seq: seq, Messages: []history.SentMessage{sm}, Txn: tx}
		timeout := w.OpTimeout
		if rng.Intn(5) == 0 {
			timeout = time.Duration(300+rng.Intn(1200)) * time.Millisecond
		}
		sctx, cancel := context.WithTimeout(context.Background(), timeout)
		op.Invoke = rec.Now()
		res, err := tp.SendInTransaction(sctx, w.Topic, m, func(context.Context, *api.Ack) client.TxnState {
			return localAnswer(tx, rec)
		})
		cancel()
		op.Complete = rec.Now()
		txnOutcome(&op, res.Ack, err)
		rec.AddOp(op)
		if w.Think > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(w.Think):
			}
		}
	}
	return nil
}

// drawTxn draws the transaction of body bname from producer name: its
// message (keys and properties as the other producers send them), its
// record (with the producer group's property, which the SDK adds and the
// broker stores), and the decisions: the local transaction answers commit,
// rollback or unknown, one in three each, and for unknown the check-back's
// answer is drawn too.
func drawTxn(rng *rand.Rand, name, bname string, pad int, group string) (client.Message, history.SentMessage, *history.TxnOp) {
	b := body(bname, pad+rng.Intn(64))
	tx := &history.TxnOp{Local: []string{history.TxnCommit, history.TxnRollback, history.TxnUnknown}[rng.Intn(3)]}
	tx.Final = tx.Local
	if tx.Local == history.TxnUnknown {
		tx.Final = []string{history.TxnCommit, history.TxnRollback}[rng.Intn(2)]
	}
	m := client.Message{Body: b}
	sm := history.SentMessage{Body: bname, Hash: history.BodyHash(b), Queue: -1}
	if rng.Intn(2) == 0 {
		m.Key = fmt.Sprintf("%s.k%d", name, rng.Intn(3))
	}
	props := map[string]string{mq.PropProducerGroup: group}
	if rng.Intn(3) == 0 {
		m.Properties = map[string]string{"trace": bname}
		props["trace"] = bname
	}
	sm.Key, sm.Props = m.Key, history.PropsHash(props)
	return m, sm, tx
}

// txnOutcome records on op how its transaction's send ended: ack is the
// half message's (nil when none came), err the send's error, which after
// an ack is about ending the transaction.
func txnOutcome(op *history.Op, ack *api.Ack, err error) {
	if ack != nil {
		op.Outcome = history.OutcomeOK
		op.Acks = []history.Ack{{Queue: ack.Queue, Offset: ack.Offset, ID: ack.Id}}
		if err != nil {
			op.Txn.EndError = err.Error()
		}
		return
	}
	op.Outcome = history.Classify(err)
	if err != nil {
		op.Error = err.Error()
	}
}

// localAnswer is tx's local transaction, run once its half message is
// stored: it notes when (and when it committed) on rec's clock and
// answers tx.Local.
func localAnswer(tx *history.TxnOp, rec *history.Recorder) client.TxnState {
	tx.AckAt = rec.Now()
	switch tx.Local {
	case history.TxnCommit:
		tx.CommitAt = rec.Now()
		return client.TxnCommit
	case history.TxnRollback:
		return client.TxnRollback
	}
	return client.TxnUnknown
}

// txnCheck is the transactional producers' check-back: it answers the
// decision drawn for the message, and records the answer.
func (w *Workload) txnCheck(rec *history.Recorder) func(context.Context, client.HalfMessage) client.TxnState {
	return func(_ context.Context, m client.HalfMessage) client.TxnState {
		name := history.BodyName(m.Body)
		v, ok := w.txnFinal.Load(name)
		if !ok {
			return client.TxnUnknown // not the workload's
		}
		rec.AddTxnCheck(history.TxnCheck{Body: name, Answer: v.(string), At: rec.Now()})
		if v == history.TxnCommit {
			return client.TxnCommit
		}
		return client.TxnRollback
	}
}

// SettleTransactions answers the check-back for every half message of the
// workload's producer group still undecided, until none is left or
// timeout passes: once the producers stopped, a transaction whose decision
// was lost to a fault is decided as its client decided it, as a restarted
// producer of the group would.
func (w *Workload) SettleTransactions(ctx context.Context, rec *history.Recorder, timeout time.Duration) (int, error) {
	return settleTransactions(ctx, w.Servers, w.Topic, TxnGroup, w.txnCheck(rec), timeout)
}

// settleTransactions runs the check-back of producer group on the group at
// servers for the half messages of topic until none is left undecided or
// timeout passes, and returns how many it decided.
func settleTransactions(ctx context.Context, servers []string, topic, group string, check func(context.Context, client.HalfMessage) client.TxnState, timeout time.Duration) (int, error) {
	cl, err := client.New(client.Config{Servers: servers, RequestTimeout: 2 * time.Second, RetryTimeout: 10 * time.Second})
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	tp, err := cl.NewTransactionProducer(client.TransactionConfig{Group: group, Check: check, Timeout: time.Millisecond,
		CheckInterval: time.Hour, Topics: []string{topic}})
	if err != nil {
		return 0, err
	}
	defer tp.Close()
	deadline := time.Now().Add(timeout)
	decided := 0
	for {
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		hs, err := cl.ListHalfMessages(lctx, topic, group, 0, 1)
		cancel()
		if err == nil && len(hs) == 0 {
			return decided, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			if err == nil {
				err = fmt.Errorf("half message %s (%q) of %s still undecided", hs[0].ID, history.BodyName(hs[0].Body), topic)
			}
			return decided, fmt.Errorf("transactions still undecided after %s: %w", timeout, err)
		}
		decided += tp.CheckNow()
		time.Sleep(100 * time.Millisecond)
	}
}
