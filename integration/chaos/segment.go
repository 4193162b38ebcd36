package chaos

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// raft-wal v0.4.2 segment layout (segment/format.go): a 32-byte file header,
// then 8-byte aligned frames, each an 8-byte header (type, 3 zero bytes,
// little-endian length or, for commit frames, CRC) and its padded payload.
// Files are preallocated, so the data ends at the first all-zero header.
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walFrameEntry     = 1
	walFrameIndex     = 2
	walFrameCommit    = 3
)

// walFrame is one frame of a segment.
type walFrame struct {
	typ uint8
	off int64 // of the frame header
	end int64 // one past the padded payload
}

// walSegment is a parsed segment file.
type walSegment struct {
	path    string
	data    []byte
	frames  []walFrame
	dataEnd int64 // one past the last frame
}

// segmentFiles lists the raft-wal segment files of a data directory, oldest
// first (names start with the zero-padded base index).
func segmentFiles(dataDir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dataDir, "log", "*.wal"))
	if err != nil {
		return nil, fmt.Errorf("list segments: %w", err)
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("no raft-wal segment in %s", filepath.Join(dataDir, "log"))
	}
	return files, nil
}

func readSegment(path string) (*walSegment, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read segment: %w", err)
	}
	s := &walSegment{path: path, data: b, dataEnd: walFileHeaderLen}
	off := int64(walFileHeaderLen)
	for off+walFrameHeaderLen <= int64(len(b)) {
		h := b[off : off+walFrameHeaderLen]
		typ := h[0]
		if typ == 0 || typ > walFrameCommit || h[1] != 0 || h[2] != 0 || h[3] != 0 {
			break
		}
		n := int64(binary.LittleEndian.Uint32(h[4:8]))
		if typ == walFrameCommit {
			n = 0
		}
		end := off + walFrameHeaderLen + n + int64((walFrameHeaderLen-(n%walFrameHeaderLen))&(walFrameHeaderLen-1))
		if end > int64(len(b)) {
			break
		}
		s.frames = append(s.frames, walFrame{typ, off, end})
		off = end
	}
	s.dataEnd = off
	return s, nil
}

// commits returns the indexes in s.frames of the commit frames.
func (s *walSegment) commits() []int {
	var out []int
	for i, f := range s.frames {
		if f.typ == walFrameCommit {
			out = append(out, i)
		}
	}
	return out
}

// TearTail simulates a torn write of the newest segment of a stopped node:
// it truncates the file at a point inside its last committed batch (after
// the previous commit frame, before the end of the last one), so the last
// record is cut mid-way. It returns a description of what it did.
func TearTail(dataDir string, rng *rand.Rand) (string, error) {
	files, err := segmentFiles(dataDir)
	if err != nil {
		return "", err
	}
	path := files[len(files)-1]
	s, err := readSegment(path)
	if err != nil {
		return "", err
	}
	cs := s.commits()
	if len(cs) == 0 {
		return "", fmt.Errorf("segment %s holds no committed batch", filepath.Base(path))
	}
	last := s.frames[cs[len(cs)-1]]
	lo := int64(walFileHeaderLen)
	if len(cs) > 1 {
		lo = s.frames[cs[len(cs)-2]].end
	}
	// Cut somewhere in (lo, last.end): at least one byte of the batch stays
	// and at least the commit frame's last byte goes.
	span := last.end - lo
	if span < 2 {
		return "", fmt.Errorf("segment %s: last batch is %d bytes", filepath.Base(path), span)
	}
	cut := lo + 1 + rng.Int63n(span-1)
	if err := os.Truncate(path, cut); err != nil {
		return "", fmt.Errorf("truncate segment: %w", err)
	}
	return fmt.Sprintf("truncated %s at byte %d (last batch %d..%d, data ended at %d; %d bytes of data cut)",
		filepath.Base(path), cut, lo, last.end, s.dataEnd, s.dataEnd-cut), nil
}

// Corruption variants of FlipByte.
const (
	// FlipBody flips a byte inside a message body: raft-wal cannot see it,
	// raftmq's batch CRC must.
	FlipBody = "body"
	// FlipFrame damages an entry frame header in the middle of the data:
	// raft-wal treats it as a torn tail and drops everything after it.
	FlipFrame = "frame"
)

// FlipByte damages one byte of committed data of a stopped node's log.
// With FlipBody it looks for one of bodies (each known to be committed) in
// the segments and flips a byte in the middle of it; with FlipFrame it
// damages the header of an entry frame in the second quarter of the oldest
// segment. The segment chosen is the oldest one holding the target, so with
// several segments a sealed one is damaged. With newest (retention runs,
// where the old part of the log, or of its oldest segment, may be deleted
// already and no longer read) it searches the newest segments first, and
// FlipFrame damages an entry in the last quarter of the newest segment that
// holds 8 entries or more. It returns what it did and the segment file.
func FlipByte(dataDir, variant string, bodies []string, rng *rand.Rand, newest bool) (desc, file string, err error) {
	files, err := segmentFiles(dataDir)
	if err != nil {
		return "", "", err
	}
	if newest {
		for i, j := 0, len(files)-1; i < j; i, j = i+1, j-1 {
			files[i], files[j] = files[j], files[i]
		}
	}
	switch variant {
	case FlipBody:
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return "", "", fmt.Errorf("read segment: %w", err)
			}
			for _, body := range bodies {
				// Bodies are "name" or "name|padding": match the name and
				// its end so w1-000001-0 does not match w1-000001-01.
				for _, pat := range [][]byte{[]byte(body + "|"), []byte(body)} {
					i := bytes.Index(b, pat)
					if i < 0 {
						continue
					}
					pos := int64(i + len(body)/2)
					if err := flipAt(f, pos); err != nil {
						return "", "", err
					}
					return fmt.Sprintf("flipped byte %d of %s (inside body %q; %d segment(s))", pos, filepath.Base(f), body, len(files)), f, nil
				}
			}
		}
		return "", "", errors.New("none of the given bodies was found in the log")
	case FlipFrame:
		var f string
		var entries []walFrame
		for _, f = range files {
			s, err := readSegment(f)
			if err != nil {
				return "", "", err
			}
			entries = entries[:0]
			for _, fr := range s.frames {
				if fr.typ == walFrameEntry {
					entries = append(entries, fr)
				}
			}
			if len(entries) >= 8 || !newest {
				break
			}
		}
		if len(entries) < 8 {
			return "", "", fmt.Errorf("segment %s holds only %d entries", filepath.Base(f), len(entries))
		}
		// Well inside stored data: the second quarter, or with newest the
		// last quarter but the last two entries.
		first := len(entries) / 4
		if newest {
			first = len(entries) - len(entries)/4 - 2
		}
		fr := entries[first+rng.Intn(len(entries)/4)]
		if err := flipAt(f, fr.off); err != nil {
			return "", "", err
		}
		return fmt.Sprintf("flipped the type byte of the entry frame at byte %d of %s (of %d entries; %d segment(s))",
			fr.off, filepath.Base(f), len(entries), len(files)), f, nil
	}
	return "", "", fmt.Errorf("flip variant %q: want %s or %s", variant, FlipBody, FlipFrame)
}

func flipAt(path string, pos int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open segment: %w", err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		return fmt.Errorf("read byte %d: %w", pos, err)
	}
	// Flip a high bit: a body byte stays a different, valid-looking byte; a
	// frame type byte becomes an unknown type.
	b[0] ^= 0x40
	if _, err := f.WriteAt(b[:], pos); err != nil {
		return fmt.Errorf("write byte %d: %w", pos, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync segment: %w", err)
	}
	return nil
}

// refusalMessage reports whether a server log says it refused a damaged log.
func refusalMessage(log string) bool {
	l := strings.ToLower(log)
	return strings.Contains(l, "log is damaged") || strings.Contains(l, "lost entries") || strings.Contains(l, "corrupt")
}

// FlipMeta damages a metadata entry (create_topic, register_node,
// commit_offsets: JSON behind a CRC) of a stopped node's log: it flips a
// byte inside the JSON of one in the older half of those in the oldest
// segment that holds any.
func FlipMeta(dataDir string, rng *rand.Rand) (string, error) { return flipMeta(dataDir, rng, false) }

// FlipRecentMeta is FlipMeta for a log that retention cuts: the oldest
// segment may hold entries below the log's first index, which the node
// rightly never reads, so it damages one in the newer half of those in the
// newest segment that holds any.
func FlipRecentMeta(dataDir string, rng *rand.Rand) (string, error) {
	return flipMeta(dataDir, rng, true)
}

func flipMeta(dataDir string, rng *rand.Rand, recent bool) (string, error) {
	files, err := segmentFiles(dataDir)
	if err != nil {
		return "", err
	}
	if recent {
		files = append([]string(nil), files...)
		slices.Reverse(files)
	}
	pat := []byte(`{"op":"`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("read segment: %w", err)
		}
		var at []int
		for i := 0; ; {
			j := bytes.Index(b[i:], pat)
			if j < 0 {
				break
			}
			at = append(at, i+j)
			i += j + len(pat)
		}
		if len(at) == 0 {
			continue
		}
		i := at[rng.Intn((len(at)+1)/2)]
		if recent {
			i = at[len(at)/2+rng.Intn(len(at)-len(at)/2)]
		}
		end := bytes.IndexByte(b[i:], '}')
		if end < len(pat)+2 {
			end = len(pat) + 2
		}
		pos := int64(i + len(pat) + rng.Intn(end-len(pat)))
		if err := flipAt(f, pos); err != nil {
			return "", err
		}
		return fmt.Sprintf("flipped byte %d of %s inside metadata entry %q (one of %d)", pos, filepath.Base(f), string(b[i:i+min(end+1, 60)]), len(at)), nil
	}
	return "", errors.New("no metadata entry found in the log")
}

// DamageStable damages a stopped node's stable store (bolt, stable.db,
// where raft keeps its current term and vote): it sets the 8-byte value
// stored after the key CurrentTerm to a far higher term (high bit flips)
// or zeroes a whole 4 KiB page past the file's meta pages.
func DamageStable(dataDir string, rng *rand.Rand) (string, error) {
	path := filepath.Join(dataDir, "stable.db")
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read stable store: %w", err)
	}
	if i := bytes.LastIndex(b, []byte("CurrentTerm")); i >= 0 && i+len("CurrentTerm")+8 <= len(b) && rng.Intn(2) == 0 {
		pos := int64(i + len("CurrentTerm") + 2) // a high byte of the big-endian term
		if err := flipAt(path, pos); err != nil {
			return "", err
		}
		return fmt.Sprintf("flipped a high byte of the current term in %s (byte %d)", filepath.Base(path), pos), nil
	}
	const page = 4096
	pages := len(b) / page
	if pages < 3 {
		return "", fmt.Errorf("stable store of %d bytes: no page past the meta pages", len(b))
	}
	p := 2 + rng.Intn(pages-2)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("open stable store: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, page), int64(p*page)); err != nil {
		return "", fmt.Errorf("zero page %d: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("sync stable store: %w", err)
	}
	return fmt.Sprintf("zeroed page %d of %d of %s", p, pages, filepath.Base(path)), nil
}

// DamageSnapshot flips a byte in the middle of the newest snapshot's
// state file (its CRC is in meta.json).
func DamageSnapshot(dataDir string, rng *rand.Rand) (string, error) {
	// raft's FileSnapshotStore keeps them in a "snapshots" directory of its own.
	states, err := filepath.Glob(filepath.Join(dataDir, "snapshots", "snapshots", "*", "state.bin"))
	if err != nil || len(states) == 0 {
		return "", fmt.Errorf("no snapshot in %s", filepath.Join(dataDir, "snapshots"))
	}
	// Names are term-index-time: the newest has the highest index.
	index := func(p string) uint64 {
		parts := strings.Split(filepath.Base(filepath.Dir(p)), "-")
		if len(parts) < 2 {
			return 0
		}
		i, _ := strconv.ParseUint(parts[1], 10, 64)
		return i
	}
	sort.Slice(states, func(i, j int) bool { return index(states[i]) < index(states[j]) })
	path := states[len(states)-1]
	st, err := os.Stat(path)
	if err != nil || st.Size() == 0 {
		return "", fmt.Errorf("snapshot %s is empty", path)
	}
	pos := rng.Int63n(st.Size())
	if err := flipAt(path, pos); err != nil {
		return "", err
	}
	return fmt.Sprintf("flipped byte %d of %d of snapshot %s", pos, st.Size(), filepath.Base(filepath.Dir(path))), nil
}

// DamageIndex damages one file of a node's queue index (store/queueindex,
// in the data directory's queueindex/ directory): it flips a byte inside a
// record, tears the file inside its last record, or deletes it. The index
// is derived from the log, so a node must start over any of these and never
// serve a message at a wrong offset.
func DamageIndex(dataDir string, rng *rand.Rand) (string, error) {
	files, err := filepath.Glob(filepath.Join(dataDir, "queueindex", "*", "*", "*.idx"))
	if err != nil {
		return "", err
	}
	var cand []string
	var sizes []int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Size() >= 28 {
			cand, sizes = append(cand, f), append(sizes, st.Size())
		}
	}
	if len(cand) == 0 {
		return "", fmt.Errorf("no queue index file with a record in %s", filepath.Join(dataDir, "queueindex"))
	}
	i := rng.Intn(len(cand))
	path, size := cand[i], sizes[i]
	name := filepath.Join(filepath.Base(filepath.Dir(filepath.Dir(path))), filepath.Base(filepath.Dir(path)), filepath.Base(path))
	switch rng.Intn(3) {
	case 0:
		pos := rng.Int63n(size)
		if err := flipAt(path, pos); err != nil {
			return "", err
		}
		return fmt.Sprintf("flipped byte %d of %d of queue index file %s", pos, size, name), nil
	case 1:
		cut := size - 1 - rng.Int63n(27)
		if err := os.Truncate(path, cut); err != nil {
			return "", fmt.Errorf("tear queue index file: %w", err)
		}
		return fmt.Sprintf("cut queue index file %s from %d to %d bytes (inside its last record)", name, size, cut), nil
	default:
		if err := os.Remove(path); err != nil {
			return "", fmt.Errorf("delete queue index file: %w", err)
		}
		return fmt.Sprintf("deleted queue index file %s (%d bytes)", name, size), nil
	}
}
