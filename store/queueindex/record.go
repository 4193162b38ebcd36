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
// first record (the file's name holds both), a word that is the message
// count or, with its top bit set, the position in the file's skip file of
// an entry holding the count and the skip list, and a CRC32C of the 12
// bytes before it and of the file's two bases, so that a record checks out
// only in its own file. Little endian.
const RecordLen = 16

// inSkip marks a record word that is a position in the skip file: records
// with a skip list (rare), and counts that do not fit the 31 bits left.
const inSkip = 1 << 31

// ErrCorrupt says a record or skip list does not match its checksum, or the
// index is not in order.
var ErrCorrupt = errors.New("queue index corrupt")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fits reports whether r can be a record of seg: its distances from the
// file's bases fit their 32 bits, and its skip entry, if it needs one,
// starts at a position a record word holds.
func (seg *segment) fits(r Record) bool {
	return r.Base >= seg.base && r.End()-seg.base <= math.MaxUint32 &&
		r.Index >= seg.first && r.Index-seg.first <= math.MaxUint32 &&
		(!needsSkipEntry(r) || seg.skipSize < inSkip)
}

// needsSkipEntry reports whether r's count and skip list go to the skip
// file.
func needsSkipEntry(r Record) bool { return len(r.Skip) > 0 || r.Count >= inSkip }

// recordCRC is the checksum of record b of seg.
func (seg *segment) recordCRC(b []byte) uint32 {
	var bases [16]byte
	binary.LittleEndian.PutUint64(bases[0:], seg.base)
	binary.LittleEndian.PutUint64(bases[8:], seg.first)
	return crc32.Update(crc32.Checksum(bases[:], castagnoli), castagnoli, b[:12])
}

// putRecord encodes r, which fits seg; skipRef is 1 + the position of its
// skip entry when needsSkipEntry(r), else 0.
func (seg *segment) putRecord(b []byte, r Record, skipRef uint32) {
	binary.LittleEndian.PutUint32(b[0:], uint32(r.Base-seg.base))
	binary.LittleEndian.PutUint32(b[4:], uint32(r.Index-seg.first))
	word := r.Count
	if skipRef != 0 {
		word = inSkip | (skipRef - 1)
	}
	binary.LittleEndian.PutUint32(b[8:], word)
	binary.LittleEndian.PutUint32(b[12:], seg.recordCRC(b))
}

// parseRecord decodes one record of seg. A record whose count is in the
// skip file comes back with Count 0 and skipRef 1 + the position of its
// skip entry (readSkip); otherwise skipRef is 0.
func (seg *segment) parseRecord(b []byte) (r Record, skipRef uint32, err error) {
	if seg.recordCRC(b) != binary.LittleEndian.Uint32(b[12:]) {
		return Record{}, 0, fmt.Errorf("%w: record checksum", ErrCorrupt)
	}
	r.Base = seg.base + uint64(binary.LittleEndian.Uint32(b[0:]))
	r.Index = seg.first + uint64(binary.LittleEndian.Uint32(b[4:]))
	word := binary.LittleEndian.Uint32(b[8:])
	if word&inSkip != 0 {
		skipRef = word&^inSkip + 1
	} else {
		r.Count = word
	}
	if (r.Count == 0 && skipRef == 0) || r.Index == 0 || r.Base < seg.base || r.Index < seg.first {
		return Record{}, 0, fmt.Errorf("%w: record of %d messages at log index %d", ErrCorrupt, r.Count, r.Index)
	}
	return r, skipRef, nil
}

// appendSkip encodes the skip entry of r: its message count, the number of
// request numbers, the request numbers, CRC32C.
func appendSkip(b []byte, r Record) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, r.Count)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.Skip)))
	for _, s := range r.Skip {
		b = binary.LittleEndian.AppendUint32(b, s)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// maxSkip bounds a skip list read from disk (requests in one entry).
const maxSkip = 1 << 20

// readSkip fills r's count and skip list from the skip entry at pos of f.
func readSkip(f file, pos int64, r *Record) error {
	var n [8]byte
	if _, err := f.ReadAt(n[:], pos); err != nil {
		return fmt.Errorf("%w: skip entry at %d: %w", ErrCorrupt, pos, err)
	}
	count, cnt := binary.LittleEndian.Uint32(n[:]), binary.LittleEndian.Uint32(n[4:])
	if count == 0 || cnt > maxSkip || (cnt == 0 && count < inSkip) {
		return fmt.Errorf("%w: skip entry of %d messages, %d skipped, at %d", ErrCorrupt, count, cnt, pos)
	}
	b := make([]byte, 8+4*int(cnt)+4)
	if _, err := f.ReadAt(b, pos); err != nil {
		return fmt.Errorf("%w: skip entry at %d: %w", ErrCorrupt, pos, err)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return fmt.Errorf("%w: skip entry checksum at %d", ErrCorrupt, pos)
	}
	r.Count, r.Skip = count, nil
	if cnt > 0 {
		r.Skip = make([]uint32, cnt)
		for i := range r.Skip {
			r.Skip[i] = binary.LittleEndian.Uint32(body[8+4*i:])
		}
	}
	return nil
}
