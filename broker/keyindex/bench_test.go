package keyindex

import (
	"fmt"
	"testing"
)

// BenchmarkAdd: one key per message, flushed every 100k keys (the broker
// flushes once a second).
func BenchmarkAdd(b *testing.B) {
	x, err := Open(b.TempDir(), DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := x.Add(uint64(i/16+1), uint32(i%16), "orders", fmt.Sprintf("order-%d", i)); err != nil {
			b.Fatal(err)
		}
		if i%100000 == 99999 {
			if err := x.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkLookup: one key among 1M indexed, read back from a flushed file.
func BenchmarkLookup(b *testing.B) {
	x, err := Open(b.TempDir(), DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	const n = 1 << 20
	for i := 0; i < n; i++ {
		x.Add(uint64(i/16+1), uint32(i%16), "orders", fmt.Sprintf("order-%d", i))
	}
	x.Done(n/16 + 1)
	if err := x.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		hits, err := x.Lookup("orders", fmt.Sprintf("order-%d", i%n), 4)
		if err != nil || len(hits) == 0 {
			b.Fatal(hits, err)
		}
	}
}
