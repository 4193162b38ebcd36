package replica

import "sort"

// LocateEntry returns the index record of log entry logIndex in queue q of a
// topic (false when the entry holds no stored message of that queue, the
// topic is unknown, or retention dropped the record). Lookups by id or key
// resolve a message's queue offset with it.
func (f *fsm) LocateEntry(topicName string, q int32, logIndex uint64) (Location, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.topics[topicName]
	if t == nil || q < 0 || int(q) >= len(t.queues) {
		return Location{}, false
	}
	recs := t.queues[q].records
	i := sort.Search(len(recs), func(i int) bool { return recs[i].index >= logIndex })
	if i == len(recs) || recs[i].index != logIndex {
		return Location{}, false
	}
	r := recs[i]
	return Location{Base: r.base, LogIndex: r.index, Count: r.count, Skip: r.skipped()}, true
}

// LocateEntry returns the index record of log entry logIndex in queue q of a
// topic, as this node applied it.
func (n *Node) LocateEntry(topic string, q int32, logIndex uint64) (Location, bool) {
	return n.fsm.LocateEntry(topic, q, logIndex)
}
