package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// MetaHeaderLen is the framing of a metadata command: the CmdMeta type byte
// and a big-endian CRC32C of the payload that follows. store/ owns the
// payload (JSON); the framing is checked here so that every entry read from
// disk is verified without interpreting it.
const MetaHeaderLen = 1 + 4

// CheckMeta checks the framing and CRC of a metadata command.
func CheckMeta(data []byte) error {
	if len(data) < MetaHeaderLen || CommandType(data[0]) != CmdMeta {
		return fmt.Errorf("%w: not a metadata command", ErrCorrupt)
	}
	if got, want := crc32Of(data[MetaHeaderLen:]), binary.BigEndian.Uint32(data[1:MetaHeaderLen]); got != want {
		return fmt.Errorf("%w: metadata crc32c %08x, header says %08x", ErrCorrupt, got, want)
	}
	return nil
}

// CheckEntry verifies what can be verified of a log entry without decoding
// its contents: that it is the entry asked for, and the checksum of every
// raftmq command (the batch CRC, or the metadata CRC). raftmq writes only
// batches and metadata commands, so a command of any other type, or a raft
// entry of a type that carries no data holding some, is damage too (a
// flipped type byte would otherwise make a node skip the entry).
func CheckEntry(idx uint64, l *raft.Log) error {
	if l.Index != idx {
		return fmt.Errorf("%w: the log store returned entry %d for index %d", ErrCorrupt, l.Index, idx)
	}
	switch l.Type {
	case raft.LogCommand:
	case raft.LogConfiguration:
		return nil
	case raft.LogNoop, raft.LogBarrier:
		if len(l.Data) > 0 {
			return fmt.Errorf("%w: %s entry with %d bytes of data", ErrCorrupt, l.Type, len(l.Data))
		}
		return nil
	default:
		return fmt.Errorf("%w: unknown raft entry type %d", ErrCorrupt, l.Type)
	}
	if len(l.Data) == 0 {
		return fmt.Errorf("%w: empty command", ErrCorrupt)
	}
	switch CommandType(l.Data[0]) {
	case CmdBatch:
		_, err := ParseBatch(l.Data, 0)
		return err
	case CmdMeta:
		return CheckMeta(l.Data)
	}
	return fmt.Errorf("%w: unknown command type %d", ErrCorrupt, l.Data[0])
}

// GetLog reads an entry from the raw store and checks it (CheckEntry). A
// damaged entry, or one the store cannot read back, is an error wrapping
// ErrCorrupt, never raft.ErrLogNotFound: that would make a leader send its
// snapshot instead, and the follower would then miss the entry's messages.
// The damage is reported once per index to the OnDamaged callback.
//
// Raft reads every entry it replicates or applies through here once it has
// left logCache, and Stores.Read and Verify read through here too.
func (g *guard) GetLog(idx uint64, out *raft.Log) error {
	err := g.check(idx, out)
	var c closingErr
	switch {
	case err == nil, errors.Is(err, raft.ErrLogNotFound):
	case errors.As(err, &c):
		return c.err // the store refuses reads while closing: nothing is damaged
	default:
		g.damage.report(idx, err)
	}
	return err
}

// closingErr is the error of a read that failed because the store is
// closing.
type closingErr struct{ err error }

func (e closingErr) Error() string { return e.err.Error() }
func (e closingErr) Unwrap() error { return e.err }

// check is GetLog without reporting damage: the background check (bg.go)
// first makes sure that an entry it failed to read was not deleted
// meanwhile by retention.
func (g *guard) check(idx uint64, out *raft.Log) error {
	err := g.LogStore.GetLog(idx, out)
	if errors.Is(err, raft.ErrLogNotFound) {
		return err
	}
	if err != nil {
		select {
		case <-g.stop:
			return closingErr{err}
		default:
		}
		return fmt.Errorf("%w: log entry %d cannot be read: %w", ErrCorrupt, idx, err)
	}
	if cerr := CheckEntry(idx, out); cerr != nil {
		return fmt.Errorf("log entry %d: %w", idx, cerr)
	}
	return nil
}

// damageLog remembers the damaged entries found by reads and tells the
// owner of each one once.
type damageLog struct {
	mu       sync.Mutex
	first    uint64 // lowest damaged index found (0: none)
	firstErr error
	seen     map[uint64]bool
	notify   func(index uint64, err error)
}

// maxDamageSeen bounds the indexes remembered for reporting once; beyond
// it every further damaged index is still reported, possibly repeatedly.
const maxDamageSeen = 1024

func (d *damageLog) report(idx uint64, err error) {
	d.mu.Lock()
	if d.seen[idx] {
		d.mu.Unlock()
		return
	}
	if d.seen == nil {
		d.seen = map[uint64]bool{}
	}
	if len(d.seen) < maxDamageSeen {
		d.seen[idx] = true
	}
	if d.first == 0 || idx < d.first {
		d.first, d.firstErr = idx, err
	}
	notify := d.notify
	d.mu.Unlock()
	if notify != nil {
		notify(idx, err)
	}
}

func (d *damageLog) get() (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.first, d.firstErr
}

// Damaged returns the lowest index of a damaged entry found while this node
// read its log since it opened, and why (0, nil: none found). A node with
// a damaged entry must not serve, lead or replicate from it; see
// Options.OnDamaged.
func (s *Stores) Damaged() (uint64, error) {
	if s.guard == nil {
		return 0, nil
	}
	return s.guard.damage.get()
}
