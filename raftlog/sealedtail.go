package raftlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft-wal/fs"
	"github.com/hashicorp/raft-wal/metadb"
	"github.com/hashicorp/raft-wal/segment"
	"github.com/hashicorp/raft-wal/types"
)

// A raft-wal v0.4.2 segment is sealed by the append that fills it: that
// append writes an index frame before its commit frame, and the rotation to
// a new segment (recording the seal in the metadata, then creating the next
// file) runs afterwards on raft-wal's rotation goroutine. A Close between the
// two leaves a file that holds its index while the metadata still lists it
// as the unsealed tail; so does a crash between a tail truncation's
// ForceSeal and its metadata commit. On open raft-wal recovers such a file as
// the tail, its writer sees the index frame and says it is sealed, and every
// append fails with ErrSealed, at every start.
//
// startAfterSealedTail runs before raft-wal opens the log and finishes what
// was interrupted, the way raft-wal's rotation does it:
//
//   - a seal that its commit frame covers (the entries are durable and the
//     index lists them): the segment's file is fsynced, then one metadata
//     commit records the seal (MaxIndex, IndexStart, SealTime) and appends a
//     new, empty tail segment whose file does not exist yet. raft-wal's open
//     creates a listed tail file that is missing, as after a crash inside its
//     own rotation. A crash before the commit leaves the log as it was (the
//     next start repeats this); one after it is a log raft-wal opens.
//   - a seal that no valid commit covers (the process died while writing the
//     sealing batch): the entries of that batch were never committed, and
//     raft-wal recovers the tail without them but still sees the index frame.
//     The frame's header is zeroed and fsynced, so raft-wal's recovery stops
//     before it; the bytes were past the last commit, where the next append
//     writes anyway.
//
// The files are read directly, not through the segment filer's VFS: nothing
// of this process has written them yet.

// Constants of raft-wal v0.4.2's segment file format (segment/format.go).
const (
	segFileHeaderLen  = 32
	segFrameHeaderLen = 8
	segFrameEntry     = 1
	segFrameIndex     = 2
	segFrameCommit    = 3
)

// errSealedTail is wrapped by the error of a start refused because the tail
// segment is sealed in a way the repair does not recognise.
var errSealedTail = errors.New("raft-wal's tail segment is sealed")

// startAfterSealedTail repairs a tail segment of the raft-wal log in dir
// whose file is sealed while the metadata lists it as the tail (see above);
// segmentSize is the size of a new segment. It does nothing to any other log.
func startAfterSealedTail(dir string, segmentSize int, logger hclog.Logger) error {
	if _, err := os.Stat(filepath.Join(dir, metadb.FileName)); errors.Is(err, os.ErrNotExist) {
		return nil // a new log
	}
	meta := &metadb.BoltMetaDB{}
	st, err := meta.Load(dir)
	if err != nil {
		meta.Close()
		return nil // raft-wal's open reports it
	}
	defer meta.Close()
	if len(st.Segments) == 0 {
		return nil
	}
	tail := st.Segments[len(st.Segments)-1]
	if !tail.SealTime.IsZero() {
		return nil
	}
	path := filepath.Join(dir, segment.FileName(tail))
	scan, err := scanSegment(path)
	if err != nil || scan.indexAt == 0 {
		return nil // no index frame (the usual case), or raft-wal's open reports the error
	}

	// raft-wal's own recovery must agree with the scan before anything is
	// written.
	sw, err := segment.NewFiler(dir, fs.New()).RecoverTail(tail)
	if err != nil {
		return nil // raft-wal's open reports it
	}
	sealed, indexStart, _ := sw.Sealed()
	last := sw.LastIndex()
	sw.Close()
	wantLast := uint64(0)
	if scan.entries > 0 {
		wantLast = tail.BaseIndex + scan.entries - 1
	}
	if !sealed || indexStart != uint64(scan.indexAt)+segFrameHeaderLen || last != wantLast {
		return fmt.Errorf("%w: segment %d (%s) holds an index frame at offset %d and %d committed entries, "+
			"raft-wal recovers it as sealed=%v at %d with last index %d: "+
			"the log cannot be appended to and is not repaired automatically: %w",
			errSealedTail, tail.ID, path, scan.indexAt, scan.entries, sealed, indexStart, last, ErrCorrupt)
	}

	if scan.indexAt >= scan.committedEnd {
		if err := zeroAt(path, scan.indexAt, segFrameHeaderLen); err != nil {
			return fmt.Errorf("remove the uncommitted seal of log segment %d: %w", tail.ID, err)
		}
		logger.Info(fmt.Sprintf("log tail segment %d held a seal its last write never committed (the process stopped while writing it): removed the seal, appends go on in segment %d", tail.ID, tail.ID),
			"segment", segment.FileName(tail), "last_index", last)
		return nil
	}
	if last == 0 {
		return fmt.Errorf("%w: segment %d (%s) is sealed with no entries: %w", errSealedTail, tail.ID, path, ErrCorrupt)
	}

	if err := fsyncPath(path); err != nil {
		return fmt.Errorf("sync sealed log segment %d: %w", tail.ID, err)
	}
	sealedInfo := tail
	sealedInfo.SealTime = time.Now()
	sealedInfo.MaxIndex = last
	sealedInfo.IndexStart = indexStart
	next := types.SegmentInfo{
		ID:         st.NextSegmentID,
		BaseIndex:  last + 1,
		MinIndex:   last + 1,
		SizeLimit:  uint32(segmentSize),
		Codec:      tail.Codec,
		CreateTime: time.Now(),
	}
	segs := append(append([]types.SegmentInfo(nil), st.Segments[:len(st.Segments)-1]...), sealedInfo, next)
	if err := meta.CommitState(types.PersistentState{NextSegmentID: st.NextSegmentID + 1, Segments: segs}); err != nil {
		return fmt.Errorf("record the seal of log segment %d: %w", tail.ID, err)
	}
	logger.Info(fmt.Sprintf("log tail segment %d was sealed by a shutdown at a segment's end: starting segment %d", tail.ID, next.ID),
		"sealed", segment.FileName(sealedInfo), "last_index", last, "next", segment.FileName(next))
	return nil
}

// segmentScan is what raft-wal's tail recovery (segment/writer.go
// recoverTail) finds in a segment file.
type segmentScan struct {
	indexAt      int64  // offset of the last index frame's header (0: none)
	committedEnd int64  // end of the commit frame recovery keeps (0: none)
	entries      uint64 // entries before that commit
}

// segCommit is a commit frame: where it is, its CRC and the entries before it.
type segCommit struct {
	at      int64
	crc     uint32
	entries uint64
}

// scanSegment reads the frames of the segment file at path as raft-wal's
// recovery does: up to the first frame header that is zero, malformed or cut
// short. Recovery keeps the last commit when no entry follows it and its CRC
// (over the bytes since the commit before it) matches, the one before it
// when the CRC does not match, and the last one with the entries after it
// dropped when entries follow it.
func scanSegment(path string) (segmentScan, error) {
	f, err := os.Open(path)
	if err != nil {
		return segmentScan{}, err
	}
	defer f.Close()
	var (
		scan        segmentScan
		prev, final *segCommit
		entries     uint64
		off         = int64(segFileHeaderLen)
		hdr, zero   [segFrameHeaderLen]byte
		r           = bufio.NewReaderSize(f, 1<<20)
	)
	if _, err := r.Discard(segFileHeaderLen); err != nil {
		return scan, nil // no frames
	}
frames:
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil || hdr == zero {
			break
		}
		n := int64(binary.LittleEndian.Uint32(hdr[4:8]))
		switch hdr[0] {
		case segFrameEntry:
			entries++
		case segFrameIndex:
			scan.indexAt = off
		case segFrameCommit:
			prev, final = final, &segCommit{at: off, crc: uint32(n), entries: entries}
			n = 0
		default:
			break frames
		}
		size := n + (segFrameHeaderLen-n%segFrameHeaderLen)%segFrameHeaderLen
		if _, err := r.Discard(int(size)); err != nil {
			break
		}
		off += segFrameHeaderLen + size
	}
	keep := final
	if scan.indexAt > 0 && final != nil && final.entries == entries {
		start := int64(0)
		if prev != nil {
			start = prev.at + segFrameHeaderLen
		}
		buf := make([]byte, final.at-start)
		if _, err := f.ReadAt(buf, start); err != nil {
			return segmentScan{}, fmt.Errorf("read the last commit of %s: %w", path, err)
		}
		if crc32Of(buf) != final.crc {
			keep = prev
		}
	}
	if keep != nil {
		scan.committedEnd = keep.at + segFrameHeaderLen
		scan.entries = keep.entries
	}
	return scan, nil
}

// zeroAt writes n zero bytes at off in the file at path and fsyncs it.
func zeroAt(path string, off int64, n int) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteAt(make([]byte, n), off)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
