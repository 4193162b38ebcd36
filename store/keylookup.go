package store

import "fmt"

// LocateEntry returns the index record of log entry logIndex in queue q of a
// topic (false when the entry holds no stored message of that queue, the
// topic is unknown, or retention dropped the record). Lookups by id or key
// resolve a message's queue offset with it.
func (f *FSM) LocateEntry(topicName string, q int32, logIndex uint64) (Location, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.topics[topicName]
	if t == nil || q < 0 || int(q) >= len(t.queues) {
		return Location{}, false
	}
	// A record found passes its checksum, so it is served also while the
	// queue is rebuilt: a lookup by id answers it or "not found".
	r, ok, err := t.queues[q].ix.FindIndex(logIndex)
	if err != nil {
		f.log.Warn("queue index lookup failed", "topic", topicName, "queue", q, "log_index", logIndex, "error", err)
		f.requestRebuildLocked(t, int(q), false, fmt.Errorf("%w: topic %q queue %d log index %d: %w", ErrIndexDamaged, topicName, q, logIndex, err))
	}
	if !ok || r.End() <= t.queues[q].min {
		return Location{}, false
	}
	return location(r), true
}

// LocateEntry returns the index record of log entry logIndex in queue q of a
// topic, as this node applied it.
func (s *Store) LocateEntry(topic string, q int32, logIndex uint64) (Location, bool) {
	return s.fsm.LocateEntry(topic, q, logIndex)
}
