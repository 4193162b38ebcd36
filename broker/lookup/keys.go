package lookup

import (
	"errors"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

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

const (
	maxFindBytes  = 16 << 20 // bodies of one answer, past its first message
	keyIndexBatch = 4096     // entries indexed before the loop looks up again
	keyIndexFlush = time.Second
	keyIndexDelay = 2 * time.Millisecond // from an apply to the round that indexes it
)

// FindRequest looks messages of a topic up by key.
type FindRequest struct {
	Topic string
	Key   string
	Max   int
	// BeginMS and EndMS bound the messages' timestamps (unix ms; 0: open).
	BeginMS, EndMS int64
}

// Keys is a node's key index (package keyindex) and what keeps it: Run
// follows the applied index, Find answers from it.
type Keys struct {
	x    *keyindex.Index
	log  hclog.Logger
	fsm  State
	rlog Log
}

// OpenKeys opens the key index in dir over fsm and rlog.
func OpenKeys(dir string, opts keyindex.Options, logger hclog.Logger, fsm State, rlog Log) (*Keys, error) {
	x, err := keyindex.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	return &Keys{x: x, log: logger, fsm: fsm, rlog: rlog}, nil
}

// Next is the next log index the index will take.
func (k *Keys) Next() uint64 { return k.x.Next() }

// Find returns up to req.Max stored messages of topic ti with the key (one
// word of its key, or its UNIQ_KEY), newest first; req is valid and ti the
// applied state of req.Topic.
func (k *Keys) Find(ti store.TopicInfo, req FindRequest) ([]entry.Message, error) {
	hits, err := k.x.Lookup(req.Topic, req.Key, 4*req.Max+16)
	if err != nil {
		return nil, err
	}
	var out []entry.Message
	seen := map[string]bool{}
	size := 0
	for _, h := range hits {
		if len(out) >= req.Max {
			break
		}
		m, ok := k.storedMessage(ti, h, req)
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

// Run indexes applied entries as they come, flushes the index once a
// second, drops index files the log no longer covers, and closes the index
// when stop closes.
func (k *Keys) Run(stop <-chan struct{}) {
	defer func() {
		if err := k.x.Close(); err != nil {
			k.log.Warn("key index: close", "error", err)
		}
	}()
	flush := time.NewTicker(keyIndexFlush)
	defer flush.Stop()
	for {
		changed := k.fsm.Changed()
		more := k.indexKeys()
		if more {
			select {
			case <-stop:
				return
			default:
				continue
			}
		}
		select {
		case <-stop:
			return
		case <-changed:
			// Let the apply's answers go out first, and take the
			// entries of the next few milliseconds in the same round.
			select {
			case <-stop:
				return
			case <-time.After(keyIndexDelay):
			}
		case <-flush.C:
			if err := k.x.Flush(); err != nil {
				k.log.Warn("key index: flush", "error", err)
			}
			if err := k.x.DropBelow(k.rlog.FirstIndex()); err != nil {
				k.log.Warn("key index: drop old files", "error", err)
			}
		}
	}
}

// indexKeys indexes up to keyIndexBatch applied entries; it reports whether
// more are waiting.
func (k *Keys) indexKeys() bool {
	applied := k.fsm.Applied()
	next := max(k.x.Next(), 1)
	if first := k.rlog.FirstIndex(); first > next {
		k.x.Skip(first) // deleted by retention, or replaced by a snapshot
		next = first
	}
	for n := 0; next <= applied; next, n = next+1, n+1 {
		if n == keyIndexBatch {
			return true
		}
		e, err := k.rlog.ReadUncached(next)
		switch {
		case errors.Is(err, raftlog.ErrBelowFloor):
			k.x.Done(next)
			continue
		case err != nil:
			k.log.Warn("key index: cannot read the log; trying again later", "index", next, "error", err)
			return false
		}
		if err := k.indexEntry(next, e); err != nil {
			k.log.Warn("key index: entry not indexed", "index", next, "error", err)
		}
		k.x.Done(next)
	}
	return false
}

func (k *Keys) indexEntry(index uint64, e raftlog.Entry) error {
	var addErr error
	err := entry.Each(e, func(_ int, topic string, ordinal uint32, m *raftlog.MessageView) bool {
		for _, key := range messageKeys(string(m.Key), m.Properties()[UniqKeyProperty]) {
			if addErr = k.x.Add(index, ordinal, topic, key); addErr != nil {
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

// storedMessage reads an index hit and returns its message when it is a
// stored, retained message of the topic with the key, in the time window.
func (k *Keys) storedMessage(ti store.TopicInfo, h keyindex.Hit, req FindRequest) (entry.Message, bool) {
	e, err := k.rlog.Read(h.LogIndex)
	if err != nil {
		return entry.Message{}, false
	}
	m, _, ok, err := entry.At(h.LogIndex, e, h.Ordinal)
	if err != nil || !ok || m.Topic != req.Topic || !hasKey(m, req.Key) ||
		(req.BeginMS > 0 && m.Timestamp < req.BeginMS) || (req.EndMS > 0 && m.Timestamp > req.EndMS) ||
		int(m.Queue) >= len(ti.Queues) {
		return entry.Message{}, false
	}
	m.Body = append([]byte(nil), m.Body...)
	loc, held := k.fsm.LocateEntry(req.Topic, m.Queue, h.LogIndex)
	if !held {
		return entry.Message{}, false // a deleted (or re-created) topic, or dropped by retention
	}
	off, stored, err := entry.OffsetOf(e, req.Topic, m.Queue, loc, h.Ordinal)
	if err != nil || !stored {
		return entry.Message{}, false // a duplicate or refused request
	}
	if off < ti.Queues[m.Queue].Min || off >= loc.Base+uint64(loc.Count) {
		return entry.Message{}, false
	}
	m.Offset = off
	return m, true
}

func hasKey(m entry.Message, key string) bool {
	for _, k := range messageKeys(m.Key, m.Properties[UniqKeyProperty]) {
		if k == key {
			return true
		}
	}
	return false
}
