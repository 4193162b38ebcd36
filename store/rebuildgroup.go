package store

import (
	"fmt"
	"iter"
	"time"

	"github.com/raftmq/raftmq/raftlog"
)

// groupWindow is how many log entries a group reads and decodes at once
// before its members take them.
const groupWindow = 1024

// rebuildGroup is the log as a group of queue rebuilds reads it: a window
// of entries read and decoded once, each into the candidates of every
// member that waits for it.
type rebuildGroup struct {
	log    LogReader
	topics map[string][]*groupMember
	lo, hi uint64  // the window: entries lo..hi-1
	errs   []error // errs[i]: what reading entry lo+i met
	read   uint64  // entries read, by the group and by its members alone
}

// groupMember is one queue's rebuild in a group.
type groupMember struct {
	g      *rebuildGroup
	n      int                     // the queue
	queues int                     // its topic's queue count (set when its rebuild starts)
	yield  func(struct{}) bool     // in the member's coroutine: wait for the group
	next   func() (struct{}, bool) // in the group's: run the member until it waits
	done   bool
	// need is the entry the member waits for, until the end of the
	// range it reads (what the window may read up to for it).
	need, until uint64
	// win[i] is the member's candidates in entry g.lo+i, for the entries
	// from from on (those it may take from the window).
	win  [][]candidate
	from uint64
}

// rebuildGroup rebuilds the queues reqs name together, reading the log
// once for all of them.
//
// Each queue's rebuild is the lone one (rebuild: its own scan of the old
// index, gaps, passes, checks and last step under the write lock), run as
// a coroutine (iter.Pull) on this goroutine. When it needs a log entry
// past the group's window it yields. Once every member waits, the group
// reads the next window from the lowest entry any member waits for, decodes
// each entry once into the candidates of each member whose range it is in,
// and resumes the members whose entry the window holds. So the read starts
// at the lowest start, and a queue whose range starts higher joins when the
// window reaches it; grouping by start instead would read the log once per
// distinct start. Only one member runs at a time, so members share nothing
// that a lone rebuild would not; a member yields with no lock held, and
// under the write lock (its last step, a short tail) it reads the log
// itself, as it does what lies below the window (its careful pass and the
// lookback before it read back).
func (f *FSM) rebuildGroup(rb *rebuilds, reqs []rebuildReq) {
	if len(reqs) == 1 {
		f.rebuild(rb, reqs[0], nil)
		return
	}
	start, rebuilt := time.Now(), rb.rebuilt.Load()
	g := &rebuildGroup{log: rb.log, topics: map[string][]*groupMember{}}
	live := make([]*groupMember, 0, len(reqs))
	for _, req := range reqs {
		m := &groupMember{g: g, n: req.n}
		next, stop := iter.Pull(func(yield func(struct{}) bool) {
			m.yield = yield
			f.rebuild(rb, req, m)
		})
		defer stop()
		m.next = next
		g.topics[req.topic] = append(g.topics[req.topic], m)
		live = append(live, m)
	}
	// resume runs each member the window serves until it waits past the
	// window or is done, and keeps those not done.
	resume := func() {
		kept := live[:0]
		for _, m := range live {
			if m.need < g.lo || m.need >= g.hi {
				kept = append(kept, m)
			} else if _, ok := m.next(); ok {
				kept = append(kept, m)
			} else {
				m.done = true
			}
		}
		live = kept
	}
	g.hi = 1 // a member needs entry 0 until it first runs
	resume()
	logged := time.Now()
	for len(live) > 0 {
		g.load(live)
		resume()
		if len(live) > 0 && time.Since(logged) >= checkIndexEvery {
			logged = time.Now()
			f.log.Info("queue indexes: rebuilding from the log", "queues", len(reqs), "left", len(live),
				"log_index", g.hi-1, "entries_read", g.read, "took", time.Since(start).Round(time.Millisecond))
		}
	}
	f.log.Info("queue indexes: rebuild of a group ended", "queues", len(reqs), "rebuilt", rb.rebuilt.Load()-rebuilt,
		"entries_read", g.read, "took", time.Since(start).Round(time.Millisecond))
}

// load reads the next window, from the lowest entry the waiting members
// need, up to groupWindow entries and no further than the end of the
// farthest range they read.
func (g *rebuildGroup) load(waiting []*groupMember) {
	lo, hi := waiting[0].need, uint64(0)
	for _, m := range waiting {
		lo, hi = min(lo, m.need), max(hi, m.until)
	}
	hi = min(max(hi, lo+1), lo+groupWindow)
	g.lo, g.hi = lo, hi
	for _, m := range waiting {
		m.from = m.need
		if len(m.win) < int(hi-lo) {
			m.win = append(m.win, make([][]candidate, int(hi-lo)-len(m.win))...)
		}
		for i := range m.win {
			m.win[i] = m.win[i][:0]
		}
	}
	g.errs = g.errs[:0]
	var counts []uint32
	for idx := lo; idx < hi; idx++ {
		i := idx - lo
		e, err := g.log.ReadUncached(idx)
		g.read++
		if data := e.Data; err == nil && len(data) > 0 && raftlog.CommandType(data[0]) == raftlog.CmdBatch {
			var batch raftlog.Batch
			if batch, err = raftlog.ParseReadBatch(data, e.At); err == nil {
				err = batch.Each(func(r int, rv *raftlog.RequestView) bool {
					counted := false
					var top uint32
					for _, m := range g.topics[rv.Topic] {
						if m.done || m.from > idx {
							continue
						}
						if !counted {
							counts, top = queueCounts(rv, counts)
							counted = true
						}
						if n := inQueue(counts, top, m.queues, m.n); n > 0 {
							m.win[i] = append(m.win[i], requestCandidate(rv, r, n))
						}
					}
					return true
				})
			}
			if err != nil {
				err = fmt.Errorf("entry %d: %w", idx, err)
			}
		}
		g.errs = append(g.errs, err)
	}
}

// candidates appends to cands the member's candidates in entry idx from
// the window, waiting for the group to read it when it lies past the
// window; hi ends the range the member reads. False: the window does not
// hold it for the member (it lies below), which reads it alone.
func (m *groupMember) candidates(idx, hi uint64, cands []candidate) ([]candidate, bool, error) {
	g := m.g
	if idx >= g.hi {
		m.need, m.until = idx, hi
		if !m.yield(struct{}{}) {
			return cands, true, errStopped
		}
	}
	if idx < g.lo || idx < m.from || idx >= g.hi {
		return cands, false, nil
	}
	i := idx - g.lo
	return append(cands, m.win[i]...), true, g.errs[i]
}
