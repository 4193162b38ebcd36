package broker

import (
	"fmt"
	"strings"

	"github.com/raftmq/raftmq/broker/keyindex"
	"github.com/raftmq/raftmq/broker/lookup"
	"github.com/raftmq/raftmq/store"
)

// Lookup by key: every node keeps its own key index on disk, derived from
// its log (package lookup: lookup.Keys).

// UniqKeyProperty is RocketMQ's client-generated unique id of a message,
// indexed like a key.
const UniqKeyProperty = lookup.UniqKeyProperty

// Limits of FindMessages.
const (
	DefaultFindMessages = 32
	MaxFindMessages     = 1024
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
	x, err := lookup.OpenKeys(b.cfg.KeyIndexDir, opts, b.log, b.fsm, b.rlog)
	if err != nil {
		return err
	}
	b.keys = x
	b.goFunc(func() { x.Run(b.stop) })
	return nil
}

// FindRequest looks messages of a topic up by key.
type FindRequest = lookup.FindRequest

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
	return b.keys.Find(ti, req)
}
