package broker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/raftmq/raftmq/broker/keyindex"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Lookup by key. Every node keeps its own key index on disk (package
// keyindex), derived from its log: keyIndexLoop reads each applied entry
// and adds the keys of its messages (each space-separated word of the key,
// as RocketMQ's KEYS, and the UNIQ_KEY property). An index hit is only a
// candidate: FindMessages reads the entry, checks topic and key, and asks
// the state machine whether the message was stored and at which offset, so
// duplicates, refused requests, deleted topics and retained-away messages
// are never answered.

// UniqKeyProperty is RocketMQ's client-generated unique id of a message,
// indexed like a key.
const UniqKeyProperty = "UNIQ_KEY"

// Limits of FindMessages.
const (
	DefaultFindMessages = 32
	MaxFindMessages     = 1024
	maxFindBytes        = 16 << 20 // bodies of one answer, past its first message
	keyIndexBatch       = 4096     // entries indexed before the loop looks up again
	keyIndexFlush       = time.Second
)

func (b *Broker) openKeyIndex() error {
	if b.cfg.KeyIndexDir == "" {
		return nil
	}
	opts := keyindex.DefaultOptions()
	if b.cfg.KeyIndexSlots > 0 {
		opts.Slots = b.cfg.KeyIndexSlots
	}
	if b.cfg.KeyIndexEntries > 0 {
		opts.Entries = b.cfg.KeyIndexEntries
	}
	x, err := keyindex.Open(b.cfg.KeyIndexDir, opts)
	if err != nil {
		return err
	}
	b.keys = x
	b.goFunc(b.keyIndexLoop)
	return nil
}

// keyIndexLoop indexes applied entries as they come, flushes the index once
// a second, drops index files the log no longer covers, and closes the index
// when the broker stops.
func (b *Broker) keyIndexLoop() {
	defer func() {
		if err := b.keys.Close(); err != nil {
			b.log.Warn("key index: close", "error", err)
		}
	}()
	flush := time.NewTicker(keyIndexFlush)
	defer flush.Stop()
	for {
		changed := b.fsm.Changed()
		more := b.indexKeys()
		if more {
			select {
			case <-b.stop:
				return
			default:
				continue
			}
		}
		select {
		case <-b.stop:
			return
		case <-changed:
		case <-flush.C:
			if err := b.keys.Flush(); err != nil {
				b.log.Warn("key index: flush", "error", err)
			}
			if err := b.keys.DropBelow(b.rlog.FirstIndex()); err != nil {
				b.log.Warn("key index: drop old files", "error", err)
			}
		}
	}
}

// indexKeys indexes up to keyIndexBatch applied entries; it reports whether
// more are waiting.
func (b *Broker) indexKeys() bool {
	applied := b.fsm.Applied()
	next := max(b.keys.Next(), 1)
	if first := b.rlog.FirstIndex(); first > next {
		b.keys.Skip(first) // deleted by retention, or replaced by a snapshot
		next = first
	}
	for n := 0; next <= applied; next, n = next+1, n+1 {
		if n == keyIndexBatch {
			return true
		}
		data, err := b.rlog.ReadUncached(next)
		switch {
		case errors.Is(err, raftlog.ErrBelowFloor):
			b.keys.Done(next)
			continue
		case err != nil:
			b.log.Warn("key index: cannot read the log; trying again later", "index", next, "error", err)
			return false
		}
		if err := b.indexEntry(next, data); err != nil {
			b.log.Warn("key index: entry not indexed", "index", next, "error", err)
		}
		b.keys.Done(next)
	}
	return false
}

func (b *Broker) indexEntry(index uint64, data []byte) error {
	if len(data) == 0 || raftlog.CommandType(data[0]) != raftlog.CmdBatch {
		return nil
	}
	batch, err := raftlog.ParseReadBatch(data)
	if err != nil {
		return err
	}
	var ordinal uint32
	var addErr error
	err = batch.Each(func(_ int, rv *raftlog.RequestView) bool {
		first := ordinal
		ordinal += uint32(rv.Count)
		rv.Messages(func(j int, m *raftlog.MessageView) bool {
			for _, k := range messageKeys(m) {
				if err := b.keys.Add(index, first+uint32(j), rv.Topic, k); err != nil {
					addErr = err
					return false
				}
			}
			return true
		})
		return addErr == nil
	})
	if err == nil {
		err = addErr
	}
	return err
}

// messageKeys are the words of a message's key and its UNIQ_KEY, each once.
func messageKeys(m *raftlog.MessageView) []string {
	var out []string
	seen := func(k string) bool {
		for _, o := range out {
			if o == k {
				return true
			}
		}
		return false
	}
	for _, k := range strings.Fields(string(m.Key)) {
		if !seen(k) {
			out = append(out, k)
		}
	}
	if u := m.Properties()[UniqKeyProperty]; u != "" && !seen(u) {
		out = append(out, u)
	}
	return out
}

// FindRequest looks messages of a topic up by key.
type FindRequest struct {
	Topic string
	Key   string
	Max   int
	// BeginMS and EndMS bound the messages' timestamps (unix ms; 0: open).
	BeginMS, EndMS int64
}

// FindMessages returns up to Max stored messages of a topic with the key
// (one word of its key, or its UNIQ_KEY), newest first, from this node's
// index and log.
func (b *Broker) FindMessages(req FindRequest) ([]Message, error) {
	if err := store.ValidateName("topic", req.Topic); err != nil {
		return nil, storeErr(err)
	}
	switch {
	case req.Key == "" || strings.ContainsAny(req.Key, " \t\n"):
		return nil, invalid("find messages: the key must be one non-empty word (a message's key is split into words at spaces)")
	case len(req.Key) > maxKeyBytes:
		return nil, invalid("find messages: key of %d bytes, at most %d", len(req.Key), maxKeyBytes)
	case req.BeginMS < 0 || req.EndMS < 0 || (req.EndMS > 0 && req.EndMS < req.BeginMS):
		return nil, invalid("find messages: time window %d..%d ms", req.BeginMS, req.EndMS)
	}
	if req.Max <= 0 {
		req.Max = DefaultFindMessages
	}
	req.Max = min(req.Max, MaxFindMessages)
	if b.keys == nil {
		return nil, fmt.Errorf("%w: node %s keeps no key index", ErrFailedPrecondition, b.cfg.NodeID)
	}
	ti, err := b.fsm.Topic(req.Topic)
	if err != nil {
		return nil, b.replicaErr(err)
	}
	hits, err := b.keys.Lookup(req.Topic, req.Key, 4*req.Max+16)
	if err != nil {
		return nil, err
	}
	var out []Message
	seen := map[string]bool{}
	size := 0
	for _, h := range hits {
		if len(out) >= req.Max {
			break
		}
		m, ok := b.storedMessage(ti, h, req)
		if !ok || seen[m.ID] {
			continue
		}
		if size += len(m.Body); len(out) > 0 && size > maxFindBytes {
			break
		}
		seen[m.ID] = true
		out = append(out, m)
	}
	return out, nil
}

// storedMessage reads an index hit and returns its message when it is a
// stored, retained message of the topic with the key, in the time window.
func (b *Broker) storedMessage(ti store.TopicInfo, h keyindex.Hit, req FindRequest) (Message, bool) {
	data, err := b.rlog.Read(h.LogIndex)
	if err != nil || len(data) == 0 || raftlog.CommandType(data[0]) != raftlog.CmdBatch {
		return Message{}, false
	}
	batch, err := raftlog.ParseReadBatch(data)
	if err != nil {
		return Message{}, false
	}
	var found Message
	var ok bool
	var ordinal uint32
	var reqIndex int
	var queue uint32
	var within uint64 // messages of the queue before it in its request
	batch.Each(func(i int, rv *raftlog.RequestView) bool {
		first := ordinal
		ordinal += uint32(rv.Count)
		if h.Ordinal < first || h.Ordinal >= ordinal {
			return true
		}
		if rv.Topic != req.Topic {
			return false
		}
		rv.Messages(func(j int, m *raftlog.MessageView) bool {
			if first+uint32(j) < h.Ordinal {
				return true
			}
			if !hasKey(m, req.Key) || (req.BeginMS > 0 && m.Timestamp < req.BeginMS) || (req.EndMS > 0 && m.Timestamp > req.EndMS) {
				return false
			}
			found = Message{Topic: rv.Topic, Queue: int32(m.Queue), ID: raftlog.MessageID(h.LogIndex, h.Ordinal), Key: string(m.Key),
				Tag: string(m.Tag), Properties: m.Properties(), Body: append([]byte(nil), m.Body...), Timestamp: m.Timestamp}
			queue, reqIndex, ok = m.Queue, i, true
			return false
		})
		if ok {
			rv.Messages(func(j int, m *raftlog.MessageView) bool {
				if first+uint32(j) >= h.Ordinal {
					return false
				}
				if m.Queue == queue {
					within++
				}
				return true
			})
		}
		return false
	})
	if !ok || int(queue) >= len(ti.Queues) {
		return Message{}, false
	}
	loc, held := b.fsm.LocateEntry(req.Topic, int32(queue), h.LogIndex)
	if !held {
		return Message{}, false // a deleted (or re-created) topic, or dropped by retention
	}
	// The queue's messages in the entry come from the requests that were
	// stored, in order: count those of the requests before this one.
	skipped := map[uint32]bool{}
	for _, s := range loc.Skip {
		skipped[s] = true
	}
	if skipped[uint32(reqIndex)] {
		return Message{}, false // a duplicate or refused request
	}
	before := uint64(0)
	batch.Each(func(i int, rv *raftlog.RequestView) bool {
		if i >= reqIndex {
			return false
		}
		if rv.Topic == req.Topic && !skipped[uint32(i)] {
			rv.Messages(func(_ int, m *raftlog.MessageView) bool {
				if m.Queue == queue {
					before++
				}
				return true
			})
		}
		return true
	})
	found.Offset = loc.Base + before + within
	if found.Offset < ti.Queues[queue].Min || found.Offset >= loc.Base+uint64(loc.Count) {
		return Message{}, false
	}
	return found, true
}

func hasKey(m *raftlog.MessageView, key string) bool {
	for _, k := range messageKeys(m) {
		if k == key {
			return true
		}
	}
	return false
}
