package broker

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/raftmq/raftmq/broker/entry"
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
	var addErr error
	err := entry.Each(data, func(_ int, topic string, ordinal uint32, m *raftlog.MessageView) bool {
		for _, k := range messageKeys(string(m.Key), m.Properties()[UniqKeyProperty]) {
			if addErr = b.keys.Add(index, ordinal, topic, k); addErr != nil {
				return false
			}
		}
		return true
	})
	if err == nil {
		err = addErr
	}
	return err
}

// messageKeys are the words of a message's key and its UNIQ_KEY, each once.
func messageKeys(key, uniq string) []string {
	var out []string
	seen := func(k string) bool {
		for _, o := range out {
			if o == k {
				return true
			}
		}
		return false
	}
	for _, k := range strings.Fields(key) {
		if !seen(k) {
			out = append(out, k)
		}
	}
	if uniq != "" && !seen(uniq) {
		out = append(out, uniq)
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
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
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
	if err != nil {
		return Message{}, false
	}
	m, _, ok, err := entry.At(h.LogIndex, data, h.Ordinal)
	if err != nil || !ok || m.Topic != req.Topic || !hasKey(m, req.Key) ||
		(req.BeginMS > 0 && m.Timestamp < req.BeginMS) || (req.EndMS > 0 && m.Timestamp > req.EndMS) ||
		int(m.Queue) >= len(ti.Queues) {
		return Message{}, false
	}
	m.Body = append([]byte(nil), m.Body...)
	loc, held := b.fsm.LocateEntry(req.Topic, m.Queue, h.LogIndex)
	if !held {
		return Message{}, false // a deleted (or re-created) topic, or dropped by retention
	}
	off, stored, err := entry.OffsetOf(data, req.Topic, m.Queue, loc, h.Ordinal)
	if err != nil || !stored {
		return Message{}, false // a duplicate or refused request
	}
	if off < ti.Queues[m.Queue].Min || off >= loc.Base+uint64(loc.Count) {
		return Message{}, false
	}
	m.Offset = off
	return m, true
}

func hasKey(m Message, key string) bool {
	for _, k := range messageKeys(m.Key, m.Properties[UniqKeyProperty]) {
		if k == key {
			return true
		}
	}
	return false
}
