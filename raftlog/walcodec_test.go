package raftlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

func codecSamples() []raft.Log {
	at := time.Date(2026, 12, 4, 10, 11, 12, 345678901, time.UTC)
	batch := EncodeBatch(&Request{ProducerID: "p-1", Seq: 9, Topic: "t", Messages: []Message{{Body: []byte("0123456789abcdef")}}})
	return []raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: batch, AppendedAt: at},
		{Index: 1 << 40, Term: 1 << 33, Type: raft.LogConfiguration, Data: []byte{1, 2, 3}, Extensions: []byte("ext"), AppendedAt: at},
		{Index: 7, Term: 2, Type: raft.LogNoop},
		{Index: 8, Term: 2, Type: raft.LogBarrier, AppendedAt: time.UnixMilli(0)},
		{Index: 9, Term: 3, Type: raft.LogCommand, Data: batch, AppendedAt: time.UnixMilli(-5)},
	}
}

// sameLog compares two entries, AppendedAt to the millisecond.
func sameLog(a, b raft.Log) error {
	if a.Index != b.Index || a.Term != b.Term || a.Type != b.Type || !bytes.Equal(a.Data, b.Data) ||
		!bytes.Equal(a.Extensions, b.Extensions) || a.AppendedAt.IsZero() != b.AppendedAt.IsZero() ||
		(!a.AppendedAt.IsZero() && a.AppendedAt.UnixMilli() != b.AppendedAt.UnixMilli()) {
		return fmt.Errorf("got %+v, want %+v", b, a)
	}
	return nil
}

func TestWALCodecRoundTrip(t *testing.T) {
	for _, l := range codecSamples() {
		var buf bytes.Buffer
		if err := (walCodec{}).Encode(&l, &buf); err != nil {
			t.Fatal(err)
		}
		var got raft.Log
		if err := (walCodec{}).Decode(buf.Bytes(), &got); err != nil {
			t.Fatalf("decode %+v: %v", l, err)
		}
		if err := sameLog(l, got); err != nil {
			t.Fatal(err)
		}
		// raft-wal reuses the record's buffer: nothing may alias it.
		clear(buf.Bytes())
		if err := sameLog(l, got); err != nil {
			t.Fatalf("after the buffer was reused: %v", err)
		}
	}
	if err := (walCodec{}).Encode(&raft.Log{Index: 1, Type: 16}, &bytes.Buffer{}); err == nil {
		t.Fatal("a log type over 15 was encoded")
	}
}

// TestWALCodecReadsBinaryV1 decodes raft-wal's own BinaryCodec records
// exactly as BinaryCodec does.
func TestWALCodecReadsBinaryV1(t *testing.T) {
	for _, l := range codecSamples() {
		var buf bytes.Buffer
		if err := (&wal.BinaryCodec{}).Encode(&l, &buf); err != nil {
			t.Fatal(err)
		}
		var want, got raft.Log
		if err := (&wal.BinaryCodec{}).Decode(buf.Bytes(), &want); err != nil {
			t.Fatal(err)
		}
		if err := (walCodec{}).Decode(buf.Bytes(), &got); err != nil {
			t.Fatalf("decode %+v: %v", l, err)
		}
		if !want.AppendedAt.Equal(got.AppendedAt) {
			t.Fatalf("appended at %v, want %v", got.AppendedAt, want.AppendedAt)
		}
		if err := sameLog(want, got); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWALCodecSize pins the bytes the lean record saves for a small
// message's entry.
func TestWALCodecSize(t *testing.T) {
	l := codecSamples()[0]
	l.Index, l.Term = 5006, 2
	var lean, v1 bytes.Buffer
	(walCodec{}).Encode(&l, &lean)
	(&wal.BinaryCodec{}).Encode(&l, &v1)
	if got, want := lean.Len()-len(l.Data), 11; got != want {
		t.Fatalf("lean record overhead %d bytes, want %d", got, want)
	}
	if got, want := v1.Len()-len(l.Data), 21; got != want {
		t.Fatalf("BinaryCodec overhead %d bytes, want %d", got, want)
	}
}

// TestWALOpensBinaryV1Log opens a log that raft-wal wrote with its
// BinaryCodec (as earlier versions did) over several segments, reads every
// entry, appends in the lean format, and restarts the mixed log.
func TestWALOpensBinaryV1Log(t *testing.T) {
	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	const segSize = 4 << 10 // a few entries per segment
	const old = 59
	entry := func(i uint64) *raft.Log {
		return &raft.Log{Index: i, Term: 1 + i/50, Type: raft.LogCommand,
			Data:       EncodeBatch(&Request{ProducerID: "p", Seq: i, Topic: "t", Messages: []Message{{Timestamp: int64(i), Body: bytes.Repeat([]byte{byte(i)}, 300)}}}),
			AppendedAt: time.UnixMilli(1_800_000_000_000 + int64(i)).Add(123 * time.Microsecond)}
	}
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The earlier versions' raft-wal: default codec and metadata store.
	w, err := wal.Open(logDir, wal.WithSegmentSize(segSize))
	if err != nil {
		t.Fatal(err)
	}
	// 59, not 60: the 60th fills a segment, and raft-wal v0.4.2 reopens a
	// tail that Close sealed before its rotation as sealed for good.
	for i := uint64(1); i <= old; i++ {
		if err := w.StoreLog(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()

	check := func(s *Stores, last uint64) {
		t.Helper()
		if s.LastIndex() != last {
			t.Fatalf("last index %d, want %d", s.LastIndex(), last)
		}
		for i := uint64(1); i <= last; i++ {
			var l raft.Log
			if err := s.Log.GetLog(i, &l); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			want := entry(i)
			if err := sameLog(*want, l); err != nil {
				t.Fatalf("entry %d: %v", i, err)
			}
			if i <= old && !l.AppendedAt.Equal(want.AppendedAt) {
				t.Fatalf("entry %d of the old format: appended at %v, want %v", i, l.AppendedAt, want.AppendedAt)
			}
			if _, err := s.Read(i); err != nil {
				t.Fatalf("read %d: %v", i, err)
			}
		}
		if n, err := s.Verify(nil); err != nil || n != last {
			t.Fatalf("verify: %d entries, %v", n, err)
		}
	}
	s, err := Open(dir, Options{Kind: KindWAL, SegmentSize: segSize})
	if err != nil {
		t.Fatalf("open a BinaryCodec log: %v", err)
	}
	if segs, _ := s.Segments(); len(segs) < 3 {
		t.Fatalf("%d segments: the test wants several", len(segs))
	}
	check(s, old)
	for i := uint64(old + 1); i <= 120; i++ {
		if err := s.Log.StoreLogs([]*raft.Log{entry(i)}); err != nil {
			t.Fatal(err)
		}
	}
	check(s, 120)
	s.Close()
	for range 2 {
		s, err = Open(dir, Options{Kind: KindWAL, SegmentSize: segSize})
		if err != nil {
			t.Fatalf("reopen the mixed log: %v", err)
		}
		check(s, 120)
		s.Close()
	}
}

func FuzzWALCodec(f *testing.F) {
	for _, l := range codecSamples() {
		var lean, v1 bytes.Buffer
		(walCodec{}).Encode(&l, &lean)
		(&wal.BinaryCodec{}).Encode(&l, &v1)
		f.Add(lean.Bytes())
		f.Add(v1.Bytes())
	}
	f.Add([]byte{0})
	f.Add([]byte{0, 0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(bytes.Repeat([]byte{0xff}, 12))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := (walCodec{}).Decode(b, &l); err != nil {
			return
		}
		if l.Type > leanTypeMask {
			return // only a BinaryCodec record holds such a type
		}
		if y := l.AppendedAt.Year(); y < 1970 || y > 9999 {
			// Out of milliseconds' int64 range, or never written by raft.
			l.AppendedAt = time.Time{}
		}
		var buf bytes.Buffer
		if err := (walCodec{}).Encode(&l, &buf); err != nil {
			t.Fatalf("re-encode %+v: %v", l, err)
		}
		var again raft.Log
		if err := (walCodec{}).Decode(buf.Bytes(), &again); err != nil {
			t.Fatalf("decode the re-encoded %+v: %v", l, err)
		}
		if err := sameLog(l, again); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkWALCodec compares raft-wal's BinaryCodec with the log's own
// record format (walcodec.go) on one entry of each size.
func BenchmarkWALCodec(b *testing.B) {
	codecs := []struct {
		name string
		c    wal.Codec
	}{{"binary", &wal.BinaryCodec{}}, {"lean", walCodec{}}}
	for _, size := range []int{16, 1024, 64 << 10} {
		l := &raft.Log{Index: 123456, Term: 3, Type: raft.LogCommand, AppendedAt: time.Now(),
			Data: EncodeBatch(&Request{ProducerID: "p-b15d51d2ae0bb760", Seq: 8727, Topic: "bench",
				Messages: []Message{{Timestamp: time.Now().UnixMilli(), Body: make([]byte, size)}}})}
		for _, c := range codecs {
			b.Run(fmt.Sprintf("%s/encode/%dB", c.name, size), func(b *testing.B) {
				var buf bytes.Buffer
				b.SetBytes(int64(len(l.Data)))
				b.ReportAllocs()
				for b.Loop() {
					buf.Reset()
					if err := c.c.Encode(l, &buf); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("%s/decode/%dB", c.name, size), func(b *testing.B) {
				var buf bytes.Buffer
				if err := c.c.Encode(l, &buf); err != nil {
					b.Fatal(err)
				}
				var out raft.Log
				b.SetBytes(int64(len(l.Data)))
				b.ReportAllocs()
				for b.Loop() {
					if err := c.c.Decode(buf.Bytes(), &out); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestWALRecordsDoNotShareBuffers reads, after a restart (nothing cached),
// entries on both sides of the size up to which raft-wal reads records into
// its pooled buffers, keeps what each read returned, reads every entry
// again many times (the pool's buffers go round), and checks that nothing
// kept changed: dataOf may keep raft-wal's buffer only where raft-wal
// never reuses it.
func TestWALRecordsDoNotShareBuffers(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Kind: KindWAL, SegmentSize: 8 << 20}
	sizes := []int{100, walPooledMax - 64, walPooledMax - 8, walPooledMax + 1, walPooledMax + 64, 300 << 10, 1 << 10}
	// Configuration entries, whose data the store does not check.
	body := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1)}, sizes[i]) }
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sizes {
		l := &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogConfiguration, Data: body(i), AppendedAt: time.Now()}
		if err := s.Log.StoreLogs([]*raft.Log{l}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kept := make([][]byte, len(sizes))
	for round := 0; round < 20; round++ {
		for i := range sizes {
			var l raft.Log
			if err := s.Log.GetLog(uint64(i+1), &l); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(l.Data, body(i)) {
				t.Fatalf("round %d: entry %d (%d bytes) read back wrong", round, i+1, sizes[i])
			}
			if round == 0 {
				kept[i] = l.Data
			}
		}
	}
	for i := range sizes {
		if !bytes.Equal(kept[i], body(i)) {
			t.Fatalf("entry %d (%d bytes): what the first read returned changed under later reads", i+1, sizes[i])
		}
	}
}
