package bench

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram records durations in nanoseconds with a log-linear bucket layout
// (the layout of HdrHistogram): values below 2*subBuckets (2048 ns) get a
// bucket each and are exact; above that every power of two is split into
// subBuckets equal buckets, so a bucket is at most 1/1024 (0.1%) of its value
// wide. Memory is fixed (about 440 KB) whatever the number of samples.
//
// Record is safe for concurrent use (atomic counters, no lock), so one
// Histogram can take every producer goroutine's samples.
//
// Percentile definition (nearest rank): the p-th percentile of N samples is
// the smallest recorded value v such that at least ceil(p/100 * N) samples
// are <= v. For the samples 1..1000 that gives p50 = 500, p90 = 900,
// p99 = 990, p99.9 = 999 and p100 = max = 1000. A value above 2047 ns is
// reported as the upper bound of its bucket, clamped to the largest value
// recorded, so a percentile may overstate the true sample by less than 0.1%
// and never understates it.
type Histogram struct {
	counts [numBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64
	min    atomic.Uint64 // stored as value+1 so that 0 means "none yet"
	max    atomic.Uint64
}

const (
	subBucketBits = 10
	subBuckets    = 1 << subBucketBits // buckets per power of two
	exactLimit    = 2 * subBuckets     // values below this have their own bucket
	numBuckets    = exactLimit + (64-subBucketBits-1)*subBuckets
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return &Histogram{} }

// bucketOf maps a value to its bucket.
func bucketOf(v uint64) int {
	if v < exactLimit {
		return int(v)
	}
	e := bits.Len64(v) - 1 // floor(log2 v) >= subBucketBits+1
	shift := e - subBucketBits
	return exactLimit + (e-subBucketBits-1)*subBuckets + int(v>>uint(shift)) - subBuckets
}

// bucketRange is the smallest and largest value of bucket i.
func bucketRange(i int) (lo, hi uint64) {
	if i < exactLimit {
		return uint64(i), uint64(i)
	}
	j := i - exactLimit
	e := j/subBuckets + subBucketBits + 1
	shift := uint(e - subBucketBits)
	lo = uint64(j%subBuckets+subBuckets) << shift
	return lo, lo + (uint64(1) << shift) - 1
}

// Record adds one duration; negative durations count as 0.
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for {
		cur := h.max.Load()
		if v <= cur || h.max.CompareAndSwap(cur, v) {
			break
		}
	}
	for {
		cur := h.min.Load()
		if (cur != 0 && v+1 >= cur) || h.min.CompareAndSwap(cur, v+1) {
			break
		}
	}
}

// Merge adds every sample of o to h. o must not be recorded to meanwhile.
func (h *Histogram) Merge(o *Histogram) {
	if o.n.Load() == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.n.Add(o.n.Load())
	h.sum.Add(o.sum.Load())
	if m := o.max.Load(); m > h.max.Load() {
		h.max.Store(m)
	}
	if m := o.min.Load(); h.min.Load() == 0 || m < h.min.Load() {
		h.min.Store(m)
	}
}

// Count is the number of samples.
func (h *Histogram) Count() uint64 { return h.n.Load() }

// Max is the largest sample (exact), 0 when empty.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Min is the smallest sample (exact), 0 when empty.
func (h *Histogram) Min() time.Duration {
	if m := h.min.Load(); m > 0 {
		return time.Duration(m - 1)
	}
	return 0
}

// Mean is the exact mean, 0 when empty.
func (h *Histogram) Mean() time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Percentile returns the p-th percentile (0 < p <= 100) by the nearest-rank
// definition in the type's comment; 0 when empty. p <= 0 returns Min.
func (h *Histogram) Percentile(p float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	if p <= 0 {
		return h.Min()
	}
	if p >= 100 {
		return h.Max()
	}
	// Rank in 1..n. The epsilon keeps e.g. 99.9% of 1000 at rank 999 in
	// spite of 0.999*1000 = 999.0000000000001 in floating point.
	rank := uint64(math.Ceil(p/100*float64(n) - 1e-9))
	rank = min(max(rank, 1), n)
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			_, hi := bucketRange(i)
			return time.Duration(min(hi, h.max.Load()))
		}
	}
	return h.Max()
}

// Summary is the usual digest of a histogram.
type Summary struct {
	Count uint64        `json:"count"`
	Mean  time.Duration `json:"mean_ns"`
	Min   time.Duration `json:"min_ns"`
	P50   time.Duration `json:"p50_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p99_9_ns"`
	Max   time.Duration `json:"max_ns"`
}

// Summary returns count, mean, min, p50, p90, p99, p99.9 and max.
func (h *Histogram) Summary() Summary {
	return Summary{Count: h.Count(), Mean: h.Mean(), Min: h.Min(), P50: h.Percentile(50), P90: h.Percentile(90),
		P99: h.Percentile(99), P999: h.Percentile(99.9), Max: h.Max()}
}
