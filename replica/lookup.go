package replica

import (
	"fmt"
	"sort"
)

// EntryLocation returns the index record of log entry logIndex in queue q
// of a topic: where that entry's messages of the queue start, how many
// there are and which requests of the entry were not appended. ok is false
// when the entry stored no message in the queue (or retention dropped it).
func (f *fsm) EntryLocation(topicName string, q int32, logIndex uint64) (Location, bool, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	t := f.topics[topicName]
	if t == nil {
		return Location{}, false, fmt.Errorf("%w: %q", ErrUnknownTopic, topicName)
	}
	if q < 0 || int(q) >= len(t.queues) {
		return Location{}, false, fmt.Errorf("%w: queue %d of topic %q with %d queues", ErrInvalidQueue, q, topicName, len(t.queues))
	}
	recs := t.queues[q].records
	i := sort.Search(len(recs), func(i int) bool { return recs[i].index >= logIndex })
	if i == len(recs) || recs[i].index != logIndex {
		return Location{}, false, nil
	}
	r := recs[i]
	return Location{Base: r.base, LogIndex: r.index, Count: r.count, Skip: r.skipped()}, true, nil
}

// EntryLocation returns the index record of log entry logIndex in queue q
// of a topic (see fsm.EntryLocation).
func (n *Node) EntryLocation(topic string, q int32, logIndex uint64) (Location, bool, error) {
	return n.fsm.EntryLocation(topic, q, logIndex)
}
