package retention

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/raftlog"
)

// Config are the limits and periods retention runs by.
type Config struct {
	Age   time.Duration // messages older than this go (0: no limit)
	Bytes int64         // the log is kept within this many bytes (0: no limit)
	Check time.Duration // how often the leader looks for a cut
	// WriteTimeout bounds replicating one cut.
	WriteTimeout time.Duration
}

// Log is the node's Raft log as retention reads and cuts it.
type Log interface {
	Segments() ([]raftlog.Segment, error)
	AppendedAt(index uint64) (time.Time, error)
	DeleteBelow(index uint64) error
	FirstIndex() uint64
}

// State is what retention reads of the applied state.
type State interface {
	Applied() uint64
	// LogFloor is the replicated cut: the log below it is dropped.
	LogFloor() uint64
}

// Writer replicates a cut.
type Writer interface {
	Retain(ctx context.Context, below uint64) error
}

// Snapshotter takes a snapshot, so that the log below a cut can go.
type Snapshotter interface {
	Snapshot() (uint64, error)
	LastSnapshotIndex() uint64
}

// Hooks are the broker's answers retention asks for.
type Hooks struct {
	// Leading reports whether this node is a ready leader: only it cuts.
	Leading func() bool
	// Keep lowers a cut to what must stay (pending delayed messages,
	// followers that still need entries); 0 keeps everything for now.
	Keep func(cut uint64, now time.Time) uint64
	// Cut is told of every cut this node replicated, and by which limit.
	Cut func(why string)
}

// Manager runs retention on one node.
type Manager struct {
	cfg   Config
	log   hclog.Logger
	rlog  Log
	fsm   State
	w     Writer
	snap  Snapshotter
	hooks Hooks
}

// New returns a manager; Run runs it.
func New(cfg Config, logger hclog.Logger, rlog Log, fsm State, w Writer, snap Snapshotter, hooks Hooks) *Manager {
	if hooks.Keep == nil {
		hooks.Keep = func(cut uint64, _ time.Time) uint64 { return cut }
	}
	if hooks.Cut == nil {
		hooks.Cut = func(string) {}
	}
	return &Manager{cfg: cfg, log: logger, rlog: rlog, fsm: fsm, w: w, snap: snap, hooks: hooks}
}

// Run runs retention until ctx ends: a leader with limits decides cuts,
// and every node (whatever its own limits: a cut is the group's) deletes
// its log up to the replicated floor.
func (m *Manager) Run(ctx context.Context) {
	limits := m.cfg.Age > 0 || m.cfg.Bytes > 0
	t := time.NewTicker(m.cfg.Check)
	defer t.Stop()
	var deleted uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if limits && m.hooks.Leading() {
			if cut, why := m.cut(time.Now()); cut > 0 {
				m.retain(ctx, cut, why)
			}
		}
		if floor := m.fsm.LogFloor(); floor > deleted && m.deleteBelow(floor) {
			deleted = floor
		}
	}
}

// cut returns the index below which the log may go, and why (0 when
// nothing is due).
func (m *Manager) cut(now time.Time) (uint64, string) {
	segs, err := m.rlog.Segments()
	if err != nil {
		m.log.Warn("retention: cannot list the log's segments", "error", err)
		return 0, ""
	}
	cut, why := cutFor(segs, m.fsm.LogFloor(), m.cfg.Bytes, m.cfg.Age, m.rlog.AppendedAt, now)
	applied := m.fsm.Applied()
	if cut == 0 || cut > applied {
		return 0, ""
	}
	if cut = m.hooks.Keep(cut, now); cut == 0 {
		return 0, ""
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

func (m *Manager) retain(ctx context.Context, cut uint64, why string) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.WriteTimeout)
	defer cancel()
	if err := m.w.Retain(ctx, cut); err != nil {
		m.log.Warn("retention: replicating the cut failed; retrying later", "below", cut, "error", err)
		return
	}
	m.hooks.Cut(why)
	m.log.Info("retention: messages in log entries below the cut are dropped", "below", cut, "by", why,
		"age_limit", m.cfg.Age, "bytes_limit", m.cfg.Bytes)
}

// deleteBelow deletes this node's log below floor once a snapshot covers
// it; it reports whether it did.
func (m *Manager) deleteBelow(floor uint64) bool {
	if m.snap.LastSnapshotIndex()+1 < floor {
		covered, err := m.snap.Snapshot()
		if err != nil {
			m.log.Warn("retention: snapshot before deleting the log failed; retrying later", "error", err)
			return false
		}
		if covered+1 < floor {
			return false
		}
	}
	if err := m.rlog.DeleteBelow(floor); err != nil {
		m.log.Warn("retention: deleting the log failed; retrying later", "below", floor, "error", err)
		return false
	}
	m.log.Info("retention: deleted the log below the floor", "below", floor, "first", m.rlog.FirstIndex())
	return true
}
