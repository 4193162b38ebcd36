package broker

import (
	"context"
	"time"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
)

// Retention deletes old messages by whole log segments:
//
//   - The leader picks a cut: the first index of the oldest segment to keep
//     so that the log stays within RetentionBytes and holds nothing older
//     than RetentionAge (by raft's append time of a segment's last entry).
//     The tail segment is always kept, and so is everything a healthy
//     follower has not applied yet.
//   - It replicates the cut as a store.Retain command: every node's FSM
//     moves each queue's minimum offset past the dropped messages, and
//     consumers below it continue at the new minimum (PullOffsetMoved).
//   - Every node then takes a snapshot covering the cut (raft sends it to a
//     follower that needs deleted entries) and deletes its log below it.
//
// A follower that installs such a snapshot drops its whole log; reads of
// bodies it no longer holds go to a node that has them.

// retentionLoop runs retention: a leader with limits decides cuts, and
// every node (whatever its own flags: a cut is the group's) deletes its log
// up to the replicated floor.
func (b *Broker) retentionLoop() {
	limits := b.cfg.RetentionAge > 0 || b.cfg.RetentionBytes > 0
	period := b.cfg.RetentionCheck
	if period <= 0 {
		period = DefaultConfig().RetentionCheck
	}
	t := time.NewTicker(period)
	defer t.Stop()
	var deleted uint64
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		if limits && b.node.Role() == election.Leader && b.node.Ready() {
			if cut, why := b.retentionCut(time.Now()); cut > 0 {
				b.retain(cut, why)
			}
		}
		if floor := b.fsm.LogFloor(); floor > deleted && b.deleteBelow(floor) {
			deleted = floor
		}
	}
}

// retentionCut returns the index below which the log may go, and why (0
// when nothing is due).
func (b *Broker) retentionCut(now time.Time) (uint64, string) {
	segs, err := b.rlog.Segments()
	if err != nil {
		b.log.Warn("retention: cannot list the log's segments", "error", err)
		return 0, ""
	}
	cut, why := cutFor(segs, b.fsm.LogFloor(), b.cfg.RetentionBytes, b.cfg.RetentionAge, b.rlog.AppendedAt, now)
	applied := b.fsm.Applied()
	if cut == 0 || cut > applied {
		return 0, ""
	}
	cut = b.scheduleCut(cut)
	// Keep what a follower still needs while it is healthy or was heard from
	// within the grace period (a restart): deleting it would make the leader
	// send it a snapshot, and it would drop its whole log.
	servers, _ := b.node.Servers()
	for _, s := range servers {
		if s.ID == b.cfg.NodeID {
			continue
		}
		v := b.peerView(s.ID)
		p, heard := b.view.Get(s.ID)
		if heard && p.State.Damaged {
			continue // stopped applying for good: it is repaired by a wipe, not by waiting
		}
		recent := heard && now.Sub(p.LastOK) <= b.cfg.RetentionGrace
		if (v.Healthy || recent) && v.Applied+1 < cut {
			return 0, ""
		}
	}
	return cut, why
}

// cutFor is the retention policy on a log's segments (oldest first): the
// base of the oldest segment to keep so that the segments above floor hold
// at most maxBytes (0: no limit) and none whose newest entry is older than
// maxAge (0: no limit; appendedAt gives an entry's append time). The tail
// segment is always kept. It returns 0 when nothing is due, and which limit
// set the cut.
func cutFor(segs []raftlog.Segment, floor uint64, maxBytes int64, maxAge time.Duration,
	appendedAt func(uint64) (time.Time, error), now time.Time) (uint64, string) {
	// Segments wholly below the floor are deleted already (raft-wal removes
	// a file once its last reader is done): they must not count again.
	var live []raftlog.Segment
	for i, s := range segs {
		if i+1 < len(segs) && segs[i+1].Base <= floor {
			continue
		}
		live = append(live, s)
	}
	if len(live) < 2 {
		return 0, ""
	}
	cut, why := uint64(0), ""
	if maxBytes > 0 {
		var total int64
		for _, s := range live {
			total += s.Bytes
		}
		for i := 0; i+1 < len(live) && total > maxBytes; i++ {
			total -= live[i].Bytes
			cut, why = live[i+1].Base, "size"
		}
	}
	if maxAge > 0 {
		for i := 0; i+1 < len(live); i++ {
			next := live[i+1].Base
			if next <= cut {
				continue
			}
			at, err := appendedAt(next - 1)
			if err != nil || at.IsZero() || now.Sub(at) < maxAge {
				break
			}
			cut, why = next, "age"
		}
	}
	if cut <= floor {
		return 0, ""
	}
	return cut, why
}

func (b *Broker) retain(cut uint64, why string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.WriteTimeout)
	defer cancel()
	if err := b.w.Retain(ctx, cut); err != nil {
		b.log.Warn("retention: replicating the cut failed; retrying later", "below", cut, "error", err)
		return
	}
	b.m.retentionCuts.WithLabelValues(why).Inc()
	b.log.Info("retention: messages in log entries below the cut are dropped", "below", cut, "by", why,
		"age_limit", b.cfg.RetentionAge, "bytes_limit", b.cfg.RetentionBytes)
}

// deleteBelow deletes this node's log below floor once a snapshot covers
// it; it reports whether it did.
func (b *Broker) deleteBelow(floor uint64) bool {
	if b.node.LastSnapshotIndex()+1 < floor {
		covered, err := b.node.Snapshot()
		if err != nil {
			b.log.Warn("retention: snapshot before deleting the log failed; retrying later", "error", err)
			return false
		}
		if covered+1 < floor {
			return false
		}
	}
	if err := b.rlog.DeleteBelow(floor); err != nil {
		b.log.Warn("retention: deleting the log failed; retrying later", "below", floor, "error", err)
		return false
	}
	b.log.Info("retention: deleted the log below the floor", "below", floor, "first", b.rlog.FirstIndex())
	return true
}
