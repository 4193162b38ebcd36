package chaos

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"sort"
	"strconv"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/raftlog"
)

// The offline reader: it opens a stopped node's data directory with
// raftlog.Open, reads every entry from disk (nothing is cached after an
// open) and trusts nothing a broker serves. The checks built on it compare
// every node's whole log, entry by entry, and look up every acknowledged
// message at the log index and ordinal its id names.

// DiskEntry is what the comparison keeps of one log entry.
type DiskEntry struct {
	Term uint64
	Type raft.LogType
	Len  int
	Hash uint64 // FNV-64a of the data
}

// DiskLog is one node's log as read from its data directory.
type DiskLog struct {
	Node        string
	First, Last uint64
	Entries     []DiskEntry // First..Last
	// StableTerm is the current term in the stable store.
	StableTerm uint64
	// Snapshots counts the snapshots in the snapshot store.
	Snapshots int
}

// Entry returns the entry at index i, if the log holds it.
func (d *DiskLog) Entry(i uint64) (DiskEntry, bool) {
	if d.First == 0 || i < d.First || i > d.Last {
		return DiskEntry{}, false
	}
	return d.Entries[i-d.First], true
}

// DiskScan collects what the checks need while nodes' logs are read:
// the messages at the ids of acknowledged messages, the retention cuts
// announced by retain commands, and every entry that does not decode.
type DiskScan struct {
	want  map[uint64]map[uint32]string // log index -> ordinal -> message id
	Found map[string]history.DiskMessage
	// Cuts are the Below of every retain command found.
	Cuts []uint64
	// Watched are message names (history.BodyName) whose every
	// occurrence in the logs is recorded in WatchFound, once per distinct
	// topic, producer and sequence: the messages sent in transactions.
	Watched    map[string]bool
	WatchFound map[string][]history.DiskMessage
	// Bad are problems found in the logs (undecodable entries, a stable
	// store behind the log, a snapshot that does not open).
	Bad []history.Violation
}

// NewDiskScan returns a scan that looks up the given message ids.
func NewDiskScan(ids []string) *DiskScan {
	s := &DiskScan{want: map[uint64]map[uint32]string{}, Found: map[string]history.DiskMessage{}}
	for _, id := range ids {
		idx, err := raftlog.MessageIndex(id)
		if err != nil {
			continue
		}
		ord, err := strconv.ParseUint(id[16:], 16, 32)
		if err != nil {
			continue
		}
		m := s.want[idx]
		if m == nil {
			m = map[uint32]string{}
			s.want[idx] = m
		}
		m[uint32(ord)] = id
	}
	return s
}

// Watch records every occurrence of the named messages (WatchFound).
func (s *DiskScan) Watch(names []string) {
	if s.Watched == nil {
		s.Watched, s.WatchFound = map[string]bool{}, map[string][]history.DiskMessage{}
	}
	for _, n := range names {
		s.Watched[n] = true
	}
}

// watch records m of request rv when its name is watched.
func (s *DiskScan) watch(rv *raftlog.RequestView, m *raftlog.MessageView) {
	name := m.Body
	if i := bytes.IndexByte(name, '|'); i >= 0 {
		name = name[:i]
	}
	if !s.Watched[string(name)] {
		return
	}
	dm := history.DiskMessage{Producer: rv.ProducerID, Seq: rv.Seq, Topic: rv.Topic, Queue: m.Queue,
		Body: string(name), Hash: history.BodyHash(m.Body), Key: string(m.Key), Tag: string(m.Tag), Props: history.PropsHash(m.Properties()), Timestamp: m.Timestamp}
	for _, o := range s.WatchFound[dm.Body] {
		if o.Topic == dm.Topic && o.Producer == dm.Producer && o.Seq == dm.Seq {
			return
		}
	}
	s.WatchFound[dm.Body] = append(s.WatchFound[dm.Body], dm)
}

func (s *DiskScan) bad(kind, format string, args ...any) {
	if len(s.Bad) < history.MaxViolationsKept {
		s.Bad = append(s.Bad, history.Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
}

// ReadDiskLog reads the log, stable and snapshot stores of a stopped node
// and feeds every entry to scan. The node must not run: raftlog.Open takes
// the stores as the server would, and writes only what the server's own
// next open writes anyway (the durable watermark, raised to the last index
// on disk).
func ReadDiskLog(node, dataDir string, scan *DiskScan) (*DiskLog, error) {
	st, err := raftlog.Open(dataDir, raftlog.Options{Kind: raftlog.KindWAL, CacheSize: 1, CacheBytes: 1, ReadCache: 1})
	if err != nil {
		return nil, fmt.Errorf("%s: open its stores offline: %w", node, err)
	}
	defer st.Close()
	d := &DiskLog{Node: node}
	first, err := st.Log.FirstIndex()
	if err != nil {
		return nil, fmt.Errorf("%s: first index: %w", node, err)
	}
	last, err := st.Log.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("%s: last index: %w", node, err)
	}
	d.First, d.Last = first, last
	if term, err := st.Stable.GetUint64([]byte("CurrentTerm")); err == nil {
		d.StableTerm = term
	} else {
		scan.bad(history.VDisk, "%s: stable store: current term unreadable: %v", node, err)
	}
	if metas, err := st.Snapshots.List(); err != nil {
		scan.bad(history.VDisk, "%s: snapshot store: %v", node, err)
	} else {
		d.Snapshots = len(metas)
		if len(metas) > 0 {
			// FileSnapshotStore.Open checks the snapshot's CRC.
			_, rc, err := st.Snapshots.Open(metas[0].ID)
			if err != nil {
				scan.bad(history.VDisk, "%s: newest snapshot %s does not open: %v", node, metas[0].ID, err)
			} else {
				rc.Close()
			}
		}
	}
	if first == 0 {
		return d, nil
	}
	d.Entries = make([]DiskEntry, 0, last-first+1)
	var l raft.Log
	var lastTerm uint64
	for i := first; i <= last; i++ {
		if err := st.Log.GetLog(i, &l); err != nil {
			if errors.Is(err, raftlog.ErrCorrupt) {
				// raftlog checks every entry it reads: a damaged one is a
				// finding, and the entries after it are still read. It
				// stays in the list (with no term and an impossible
				// length), so the comparison with the other nodes sees it.
				scan.bad(history.VDisk, "%s: log entry %d does not read back: %v", node, i, err)
				d.Entries = append(d.Entries, DiskEntry{Len: -1})
				continue
			}
			return nil, fmt.Errorf("%s: log entry %d of %d..%d: %w", node, i, first, last, err)
		}
		if l.Index != i {
			scan.bad(history.VDisk, "%s: log entry read at index %d says index %d", node, i, l.Index)
		}
		h := fnv.New64a()
		h.Write(l.Data)
		d.Entries = append(d.Entries, DiskEntry{Term: l.Term, Type: l.Type, Len: len(l.Data), Hash: h.Sum64()})
		lastTerm = l.Term
		scan.visit(node, &l)
	}
	if d.StableTerm < lastTerm {
		scan.bad(history.VDisk, "%s: stable store's current term %d is below its last log entry's term %d", node, d.StableTerm, lastTerm)
	}
	return d, nil
}

// retainCmd is the part of store's metadata command the scan reads (its
// JSON after the type byte and a CRC32C).
type retainCmd struct {
	Op    string `json:"op"`
	Below uint64 `json:"below"`
}

var castagnoliTable = crc32.MakeTable(crc32.Castagnoli)

func (s *DiskScan) visit(node string, l *raft.Log) {
	if l.Type != raft.LogCommand {
		return
	}
	if len(l.Data) == 0 {
		s.bad(history.VDisk, "%s: log entry %d is an empty command", node, l.Index)
		return
	}
	switch raftlog.CommandType(l.Data[0]) {
	case raftlog.CmdMeta:
		if len(l.Data) < 5 || crc32.Checksum(l.Data[5:], castagnoliTable) != binary.BigEndian.Uint32(l.Data[1:5]) {
			s.bad(history.VDisk, "%s: metadata entry %d fails its CRC", node, l.Index)
			return
		}
		var c retainCmd
		if err := json.Unmarshal(l.Data[5:], &c); err != nil {
			s.bad(history.VDisk, "%s: metadata entry %d does not decode: %v", node, l.Index, err)
			return
		}
		if c.Op == "retain" {
			s.Cuts = append(s.Cuts, c.Below)
		}
	case raftlog.CmdBatch:
		b, err := raftlog.ParseBatch(l.Data, raftlog.EntryTime(l))
		if err != nil {
			s.bad(history.VDisk, "%s: batch entry %d: %v", node, l.Index, err)
			return
		}
		want := s.want[l.Index]
		var ord uint32
		err = b.Each(func(_ int, rv *raftlog.RequestView) bool {
			if len(s.Watched) > 0 {
				rv.Messages(func(_ int, m *raftlog.MessageView) bool {
					s.watch(rv, m)
					return true
				})
			}
			if len(want) > 0 {
				rv.Messages(func(j int, m *raftlog.MessageView) bool {
					id, ok := want[ord+uint32(j)]
					if !ok {
						return true
					}
					if _, seen := s.Found[id]; seen {
						return true // the entries are compared across nodes anyway
					}
					s.Found[id] = history.DiskMessage{Producer: rv.ProducerID, Seq: rv.Seq, Topic: rv.Topic, Queue: m.Queue,
						Body: history.BodyName(m.Body), Hash: history.BodyHash(m.Body), Key: string(m.Key), Tag: string(m.Tag), Props: history.PropsHash(m.Properties()),
						Timestamp: m.Timestamp}
					return true
				})
			}
			ord += uint32(rv.Count)
			return true
		})
		if err != nil {
			s.bad(history.VDisk, "%s: batch entry %d: %v", node, l.Index, err)
		}
	default:
		s.bad(history.VDisk, "%s: log entry %d has unknown command type %d", node, l.Index, l.Data[0])
	}
}

// Cut is the highest retention cut found (0: none).
func (s *DiskScan) Cut() uint64 {
	var c uint64
	for _, x := range s.Cuts {
		c = max(c, x)
	}
	return c
}

// CompareDiskLogs compares the nodes' logs entry by entry (term, type,
// data) over the range every node holds, and checks that every node holds
// the group's committed log up to committed. It reports at most one
// difference per node.
func CompareDiskLogs(logs []*DiskLog, committed uint64) []history.Violation {
	var out []history.Violation
	if len(logs) == 0 {
		return nil
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i].Node < logs[j].Node })
	for _, d := range logs {
		if d.Last < committed {
			out = append(out, history.Violation{Kind: history.VDivergent, Detail: fmt.Sprintf("%s's log on disk ends at index %d, the group had applied %d", d.Node, d.Last, committed)})
		}
	}
	lo, hi := uint64(0), ^uint64(0)
	for _, d := range logs {
		if d.First == 0 {
			return out
		}
		lo, hi = max(lo, d.First), min(hi, d.Last)
	}
	ref := logs[0]
	for _, d := range logs[1:] {
		for i := lo; i <= hi; i++ {
			a, _ := ref.Entry(i)
			b, _ := d.Entry(i)
			if a != b {
				out = append(out, history.Violation{Kind: history.VDivergent, Detail: fmt.Sprintf("log entry %d on disk: %s has term %d type %s %d bytes (hash %x), %s has term %d type %s %d bytes (hash %x)",
					i, ref.Node, a.Term, a.Type, a.Len, a.Hash, d.Node, b.Term, b.Type, b.Len, b.Hash)})
				break
			}
		}
	}
	return out
}

// BytesFrom is the data bytes of the entries d holds at index from and up.
func (d *DiskLog) BytesFrom(from uint64) int64 {
	var n int64
	for i, e := range d.Entries {
		if d.First+uint64(i) >= from {
			n += int64(e.Len)
		}
	}
	return n
}
