package bench

import (
	"math/rand"
	"sync"
	"testing"
	"time"
)

func TestPercentilesOneToThousand(t *testing.T) {
	h := NewHistogram()
	// Record in a shuffled order: the result must not depend on it.
	r := rand.New(rand.NewSource(1))
	for _, i := range r.Perm(1000) {
		h.Record(time.Duration(i + 1))
	}
	want := map[float64]time.Duration{
		0.1: 1, 1: 10, 10: 100, 25: 250, 50: 500, 75: 750, 90: 900, 99: 990, 99.9: 999, 99.99: 1000, 100: 1000,
	}
	for p, w := range want {
		if got := h.Percentile(p); got != w {
			t.Errorf("p%v = %d, want %d", p, got, w)
		}
	}
	s := h.Summary()
	if s != (Summary{Count: 1000, Mean: 500, Min: 1, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000}) {
		t.Errorf("summary = %+v", s)
	}
}

func TestPercentilesSmallSamples(t *testing.T) {
	h := NewHistogram()
	if got := h.Percentile(50); got != 0 {
		t.Errorf("empty p50 = %d, want 0", got)
	}
	if s := h.Summary(); s != (Summary{}) {
		t.Errorf("empty summary = %+v", s)
	}
	h.Record(7)
	for _, p := range []float64{0, 1, 50, 99.9, 100} {
		if got := h.Percentile(p); got != 7 {
			t.Errorf("one sample: p%v = %d, want 7", p, got)
		}
	}
	// 1, 2, 3, 4: nearest rank gives p50 = 2 (rank 2), p75 = 3, p76 = 4.
	h = NewHistogram()
	for i := 4; i >= 1; i-- {
		h.Record(time.Duration(i))
	}
	for p, w := range map[float64]time.Duration{25: 1, 26: 2, 50: 2, 75: 3, 76: 4, 99: 4} {
		if got := h.Percentile(p); got != w {
			t.Errorf("1..4: p%v = %d, want %d", p, got, w)
		}
	}
	h.Record(-5)
	if h.Min() != 0 || h.Percentile(1) != 0 {
		t.Errorf("negative sample: min %d p1 %d, want 0", h.Min(), h.Percentile(1))
	}
}

// Above 2047 ns a percentile is the upper bound of its bucket (width
// 2^(floor(log2 v)-10)), clamped to the maximum.
func TestPercentilesLargeValues(t *testing.T) {
	h := NewHistogram()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	// 500,000 ns: 2^18 <= v < 2^19, bucket width 2^8 = 256:
	// 500000 >> 8 = 1953, bucket [499968, 500223].
	// 990,000 ns: width 2^9 = 512: 990000 >> 9 = 1933, bucket [989696, 990207].
	// 999,000 ns: 999000 >> 9 = 1951, bucket [998912, 999423].
	// p100 is the exact maximum.
	want := map[float64]time.Duration{50: 500223, 99: 990207, 99.9: 999423, 100: 1000000}
	for p, w := range want {
		if got := h.Percentile(p); got != w {
			t.Errorf("p%v = %d, want %d", p, got, w)
		}
	}
	if h.Min() != time.Microsecond || h.Max() != time.Millisecond || h.Mean() != 500500*time.Nanosecond {
		t.Errorf("min %d max %d mean %d", h.Min(), h.Max(), h.Mean())
	}
	// A single large sample comes back exactly (clamped to max).
	h = NewHistogram()
	h.Record(3 * time.Second)
	if got := h.Percentile(50); got != 3*time.Second {
		t.Errorf("single 3s sample: p50 = %d", got)
	}
}

func TestBucketLayout(t *testing.T) {
	// Every bucket's range starts right after the previous one ends, and
	// bucketOf maps both ends back to the bucket.
	var next uint64
	for i := 0; i < numBuckets; i++ {
		lo, hi := bucketRange(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d, %d] maps back to %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo >= exactLimit && float64(hi-lo+1)/float64(lo) > 1.0/subBuckets {
			t.Fatalf("bucket %d [%d, %d] is wider than 1/%d of its value", i, lo, hi, subBuckets)
		}
		next = hi + 1
		if next == 0 { // wrapped: the last bucket ends at 2^64-1
			if i != numBuckets-1 {
				t.Fatalf("bucket %d ends at 2^64-1 but is not the last", i)
			}
			return
		}
	}
	t.Fatalf("buckets end at %d, not 2^64-1", next)
}

func TestMergeAndConcurrentRecord(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < 1000; i += 4 {
				if i < 500 {
					a.Record(time.Duration(i + 1))
				} else {
					b.Record(time.Duration(i + 1))
				}
			}
		}(g)
	}
	wg.Wait()
	a.Merge(b)
	if s := a.Summary(); s != (Summary{Count: 1000, Mean: 500, Min: 1, P50: 500, P90: 900, P99: 990, P999: 999, Max: 1000}) {
		t.Errorf("merged summary = %+v", s)
	}
	b.Merge(NewHistogram())
	if b.Count() != 500 || b.Min() != 501 {
		t.Errorf("merge of empty changed b: count %d min %d", b.Count(), b.Min())
	}
}
