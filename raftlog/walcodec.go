package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/types"
)

// walCodec is the record format of raft-wal entries. It writes the lean
// format and reads both it and raft-wal's BinaryCodec format, so a log
// written by an earlier version opens, reads and grows (one segment may
// hold records of both formats).
//
// BinaryCodec's record is uvarint index, uvarint term, uvarint type, data
// and extensions each with a uvarint length, and AppendedAt as
// time.MarshalBinary (15 bytes). The lean record is:
//
//	0x00                     marker: a BinaryCodec record starts with its
//	                         index, never 0, so its first byte is never 0x00
//	flags                    bits 0-3 the raft.LogType, bit 4 extensions
//	                         follow, bit 5 AppendedAt follows
//	uvarint index
//	uvarint term
//	varint  AppendedAt       unix milliseconds (when bit 5)
//	uvarint len, extensions  (when bit 4)
//	data                     the rest of the record
//
// AppendedAt keeps millisecond precision: every reader of it (retention by
// age, delay and transaction timing) works in milliseconds. The index stays
// in the record so that CheckEntry still catches a read that returned
// another entry's record.
//
// The format is told by the record itself, not by raft-wal's codec ID:
// raft-wal v0.4.2 writes codec 0 into every segment whatever codec it
// runs with, and refuses to open a segment whose ID differs from the
// running codec's (see walCodecMeta).
type walCodec struct{}

// walCodecID is the codec ID raft-wal sees in memory; on disk every
// segment says wal.CodecBinaryV1 (walCodecMeta, walCodecFiler).
const walCodecID = wal.FirstExternalCodecID + 0x7261 // "ra"

const (
	leanMark     = 0x00
	leanTypeMask = 0x0f
	leanHasExt   = 1 << 4
	leanHasTime  = 1 << 5
	leanFlags    = leanTypeMask | leanHasExt | leanHasTime
)

var _ wal.Codec = walCodec{}

func (walCodec) ID() uint64 { return walCodecID }

// Encode writes l in the lean format.
func (walCodec) Encode(l *raft.Log, w io.Writer) error {
	if l.Type > leanTypeMask {
		return fmt.Errorf("encode log entry %d: raft log type %d does not fit the record", l.Index, l.Type)
	}
	var hdr [2 + 3*binary.MaxVarintLen64]byte
	hdr[0] = leanMark
	hdr[1] = byte(l.Type)
	if len(l.Extensions) > 0 {
		hdr[1] |= leanHasExt
	}
	n := 2
	n += binary.PutUvarint(hdr[n:], l.Index)
	n += binary.PutUvarint(hdr[n:], l.Term)
	if !l.AppendedAt.IsZero() {
		hdr[1] |= leanHasTime
		n += binary.PutVarint(hdr[n:], l.AppendedAt.UnixMilli())
	}
	if len(l.Extensions) > 0 {
		n += binary.PutUvarint(hdr[n:], uint64(len(l.Extensions)))
	}
	if _, err := w.Write(hdr[:n]); err != nil {
		return err
	}
	if len(l.Extensions) > 0 {
		if _, err := w.Write(l.Extensions); err != nil {
			return err
		}
	}
	_, err := w.Write(l.Data)
	return err
}

// Decode reads a record of either format into l. Data and Extensions are
// copies: raft-wal reuses the record's buffer.
func (walCodec) Decode(b []byte, l *raft.Log) error {
	if len(b) > 0 && b[0] == leanMark {
		return decodeLean(b, l)
	}
	return decodeBinaryV1(b, l)
}

var errRecord = errors.New("malformed log record")

func decodeLean(b []byte, l *raft.Log) error {
	if len(b) < 2 || b[1]&^leanFlags != 0 {
		return fmt.Errorf("%w: lean record header", errRecord)
	}
	flags := b[1]
	d := decoder{buf: b, off: 2}
	idx := d.uvarint()
	term := d.uvarint()
	var at time.Time
	if flags&leanHasTime != 0 {
		if ms := d.varint(); d.err == nil {
			at = time.UnixMilli(ms)
		}
	}
	var ext []byte
	if flags&leanHasExt != 0 {
		ext = d.bytes(len(b))
	}
	if d.err != nil {
		return fmt.Errorf("%w: %w", errRecord, d.err)
	}
	*l = raft.Log{
		Index:      idx,
		Term:       term,
		Type:       raft.LogType(flags & leanTypeMask),
		Data:       dataOf(b, b[d.off:]),
		Extensions: cloneOrNil(ext),
		AppendedAt: at,
	}
	return nil
}

// walPooledMax is the largest record raft-wal v0.4.2 reads into a pooled
// buffer: its pool holds 64 KiB buffers only (minBufSize) and a record is
// read after the 8-byte frame header. A larger record is read into a
// buffer of exactly its size that raft-wal drops after Decode.
const walPooledMax = 64<<10 - 8

// dataOf is data, a part of record b as raft-wal hands it to Decode: the
// part itself when b is a buffer of its own that raft-wal never reuses (a
// record too large for its pool), else a copy. Large entries (group
// commits) are most of what pulls read from disk; the copy was a fifth of
// a leader's CPU while serving them.
func dataOf(b, data []byte) []byte {
	if len(b) > walPooledMax && cap(b) == len(b) && len(data) > 0 {
		return data[:len(data):len(data)]
	}
	return cloneOrNil(data)
}

// decodeBinaryV1 reads raft-wal's BinaryCodec record. It is written here,
// not called, because BinaryCodec.Decode panics on some damaged records (a
// varint that overflows) where this returns an error.
func decodeBinaryV1(b []byte, l *raft.Log) error {
	d := decoder{buf: b}
	idx := d.uvarint()
	term := d.uvarint()
	typ := d.uvarint()
	data := d.bytes(len(b))
	ext := d.bytes(len(b))
	if d.err != nil {
		return fmt.Errorf("%w: %w", errRecord, d.err)
	}
	var at time.Time
	if err := at.UnmarshalBinary(b[d.off:]); err != nil {
		return fmt.Errorf("%w: appended-at time: %w", errRecord, err)
	}
	if typ > 255 {
		return fmt.Errorf("%w: raft log type %d", errRecord, typ)
	}
	*l = raft.Log{
		Index:      idx,
		Term:       term,
		Type:       raft.LogType(typ),
		Data:       dataOf(b, data),
		Extensions: cloneOrNil(ext),
		AppendedAt: at,
	}
	return nil
}

func cloneOrNil(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// walCodecMeta is raft-wal's metadata store as the lean codec needs it.
// raft-wal v0.4.2 records codec 0 for every segment it creates, whatever
// its codec, and refuses at open a segment whose recorded codec is not the
// running codec's ID. Segments are kept as raft-wal writes them (codec 0,
// in the metadata and the segment header); in memory they carry
// walCodecID, so that raft-wal opens them. walCodec reads records of both
// formats, so that is true of every segment.
type walCodecMeta struct {
	*metadb.BoltMetaDB
}

func (m walCodecMeta) Load(dir string) (types.PersistentState, error) {
	st, err := m.BoltMetaDB.Load(dir)
	st.Segments = withCodec(st.Segments, wal.CodecBinaryV1, walCodecID)
	return st, err
}

func (m walCodecMeta) CommitState(st types.PersistentState) error {
	st.Segments = withCodec(st.Segments, walCodecID, wal.CodecBinaryV1)
	return m.BoltMetaDB.CommitState(st)
}

// withCodec returns segs with codec from replaced by to (a copy).
func withCodec(segs []types.SegmentInfo, from, to uint64) []types.SegmentInfo {
	if segs == nil {
		return nil
	}
	out := make([]types.SegmentInfo, len(segs))
	for i, s := range segs {
		if s.Codec == from {
			s.Codec = to
		}
		out[i] = s
	}
	return out
}

// walCodecFiler opens segments with the codec ID their headers hold
// (wal.CodecBinaryV1) where raft-wal passes walCodecID (walCodecMeta).
type walCodecFiler struct {
	types.SegmentFiler
}

func (f walCodecFiler) Create(info types.SegmentInfo) (types.SegmentWriter, error) {
	return f.SegmentFiler.Create(onDisk(info))
}

func (f walCodecFiler) RecoverTail(info types.SegmentInfo) (types.SegmentWriter, error) {
	return f.SegmentFiler.RecoverTail(onDisk(info))
}

func (f walCodecFiler) Open(info types.SegmentInfo) (types.SegmentReader, error) {
	return f.SegmentFiler.Open(onDisk(info))
}

func onDisk(info types.SegmentInfo) types.SegmentInfo {
	if info.Codec == walCodecID {
		info.Codec = wal.CodecBinaryV1
	}
	return info
}

// openWAL opens the raft-wal log in dir, read and written with walCodec,
// over the segment filer sf; wrapMeta, when not nil, wraps its metadata
// store.
func openWAL(dir string, sf types.SegmentFiler, wrapMeta func(types.MetaStore) types.MetaStore, segmentSize int, logger hclog.Logger) (*wal.WAL, error) {
	var meta types.MetaStore = walCodecMeta{&metadb.BoltMetaDB{}}
	if wrapMeta != nil {
		meta = wrapMeta(meta)
	}
	return wal.Open(dir,
		wal.WithCodec(walCodec{}),
		wal.WithMetaStore(meta),
		wal.WithSegmentFiler(walCodecFiler{sf}),
		wal.WithSegmentSize(segmentSize),
		wal.WithLogger(logger))
}
