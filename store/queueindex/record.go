package queueindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Record points at the messages of one queue inside one Raft entry.
type Record struct {
	Base  uint64   // queue offset of the queue's first message in the entry
	Index uint64   // Raft log index of the entry
	Count uint32   // messages of the queue in the entry
	Skip  []uint32 // request numbers of the entry that were not appended (rare)
}

// End is the offset after the record's last message.
func (r Record) End() uint64 { return r.Base + uint64(r.Count) }

// RecordLen is the size of a record on disk: the entry's first queue
// offset and its log index, each as its distance from those of the file's
// first record (the file's name holds both), the message count, the skip
// list reference (0: none; else 1 + its position in the file's skip
// file), and a CRC32C of the 16 bytes before it and of the file's two
// bases, so that a record checks out only in its own file. Little endian.
const RecordLen = 20

// ErrCorrupt says a record or skip list does not match its checksum, or the
// index is not in order.
var ErrCorrupt = errors.New("queue index corrupt")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fits reports whether r can be a record of seg: its distances from the
// file's bases fit their 32 bits.
func (seg *segment) fits(r Record) bool {
	return r.Base >= seg.base && r.End()-seg.base <= math.MaxUint32 &&
		r.Index >= seg.first && r.Index-seg.first <= math.MaxUint32
}

// recordCRC is the checksum of record b of seg.
func (seg *segment) recordCRC(b []byte) uint32 {
	var bases [16]byte
	binary.LittleEndian.PutUint64(bases[0:], seg.base)
	binary.LittleEndian.PutUint64(bases[8:], seg.first)
	return crc32.Update(crc32.Checksum(bases[:], castagnoli), castagnoli, b[:16])
}

// putRecord encodes r, which fits seg.
func (seg *segment) putRecord(b []byte, r Record, skipRef uint32) {
	binary.LittleEndian.PutUint32(b[0:], uint32(r.Base-seg.base))
	binary.LittleEndian.PutUint32(b[4:], uint32(r.Index-seg.first))
	binary.LittleEndian.PutUint32(b[8:], r.Count)
	binary.LittleEndian.PutUint32(b[12:], skipRef)
	binary.LittleEndian.PutUint32(b[16:], seg.recordCRC(b))
}

// parseRecord decodes one record of seg; the skip list is fetched
// separately.
func (seg *segment) parseRecord(b []byte) (r Record, skipRef uint32, err error) {
	if seg.recordCRC(b) != binary.LittleEndian.Uint32(b[16:]) {
		return Record{}, 0, fmt.Errorf("%w: record checksum", ErrCorrupt)
	}
	r.Base = seg.base + uint64(binary.LittleEndian.Uint32(b[0:]))
	r.Index = seg.first + uint64(binary.LittleEndian.Uint32(b[4:]))
	r.Count = binary.LittleEndian.Uint32(b[8:])
	skipRef = binary.LittleEndian.Uint32(b[12:])
	if r.Count == 0 || r.Index == 0 || r.Base < seg.base || r.Index < seg.first {
		return Record{}, 0, fmt.Errorf("%w: record of %d messages at log index %d", ErrCorrupt, r.Count, r.Index)
	}
	return r, skipRef, nil
}

// appendSkip encodes a skip list: count, the request numbers, CRC32C.
func appendSkip(b []byte, skip []uint32) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(skip)))
	for _, s := range skip {
		b = binary.LittleEndian.AppendUint32(b, s)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// maxSkip bounds a skip list read from disk (requests in one entry).
const maxSkip = 1 << 20

// readSkip reads the skip list at pos of f.
func readSkip(f file, pos int64) ([]uint32, error) {
	var n [4]byte
	if _, err := f.ReadAt(n[:], pos); err != nil {
		return nil, fmt.Errorf("%w: skip list at %d: %w", ErrCorrupt, pos, err)
	}
	cnt := binary.LittleEndian.Uint32(n[:])
	if cnt == 0 || cnt > maxSkip {
		return nil, fmt.Errorf("%w: skip list of %d at %d", ErrCorrupt, cnt, pos)
	}
	b := make([]byte, 4+4*int(cnt)+4)
	if _, err := f.ReadAt(b, pos); err != nil {
		return nil, fmt.Errorf("%w: skip list at %d: %w", ErrCorrupt, pos, err)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("%w: skip list checksum at %d", ErrCorrupt, pos)
	}
	out := make([]uint32, cnt)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(body[4+4*i:])
	}
	return out, nil
}
