package batch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// MaxRequestLimit is the largest request and batch bound the broker's
// Validate accepts: what fits in one Raft entry with the batch header.
const MaxRequestLimit = raftlog.MaxEntryBytes - raftlog.BatchOverhead

// pendingOf is a queued request whose encoded size is about size bytes.
func pendingOf(t *testing.T, seq uint64, size int, body []byte) *Pending {
	r := raftlog.Request{ProducerID: "p", Seq: seq, Topic: "t", Messages: []raftlog.Message{{Timestamp: 1780000000000}}}
	over := r.EncodedSize() + 8
	if size > over {
		r.Messages[0].Body = body[:size-over]
	}
	p := NewPending(r)
	if p.Size > MaxRequestLimit {
		t.Fatalf("test request of %d bytes is over the request limit", p.Size)
	}
	return p
}

// TestBatcherNeverBuildsOversizedEntry: with the largest bounds Validate
// allows (requests and batches of MaxRequestLimit), a mix of requests near
// those bounds is cut into batches that each encode to at most
// raftlog.MaxEntryBytes, exactly as collect counted in version 1 and at
// most that in the version the store picks, in order, with
// none lost; a request larger than MaxBatchBytes goes alone.
func TestBatcherNeverBuildsOversizedEntry(t *testing.T) {
	body := make([]byte, MaxRequestLimit)
	sizes := []int{
		MaxRequestLimit, 1, MaxRequestLimit, MaxRequestLimit/2 + 1, MaxRequestLimit / 2, 100,
		MaxRequestLimit / 4, MaxRequestLimit / 4, MaxRequestLimit / 4, MaxRequestLimit/4 + 10, 1 << 20, MaxRequestLimit - 5,
	}
	for _, maxBatch := range []int{MaxRequestLimit, 256 << 10} {
		ch := make(chan *Pending, len(sizes))
		for i, s := range sizes {
			ch <- pendingOf(t, uint64(i+1), s, body)
		}
		var seqs []uint64
		var next *Pending
		for len(ch) > 0 || next != nil {
			first := next
			if first == nil {
				first = <-ch
			}
			batch, size, left := collect(first, ch, maxBatch)
			next = left
			reqs := make([]*raftlog.Request, len(batch))
			for i, p := range batch {
				reqs[i] = &p.Req
				seqs = append(seqs, p.Req.Seq)
			}
			enc := raftlog.NewBatchBuilder(0, raftlog.BatchV1)
			for _, r := range reqs {
				enc.Add(r)
			}
			if got := enc.Len(); got != size+raftlog.BatchOverhead {
				t.Fatalf("max batch %d: batch of %d requests encodes to %d bytes, collect counted %d+%d", maxBatch, len(batch), got, size, raftlog.BatchOverhead)
			}
			v2 := raftlog.NewBatchBuilder(0, raftlog.SmallestVersion(raftlog.BatchV2, reqs))
			for _, r := range reqs {
				v2.Add(r)
			}
			if got := v2.Len(); got > enc.Len() {
				t.Fatalf("max batch %d: batch of %d requests encodes to %d bytes in the smallest version, above version 1's %d", maxBatch, len(batch), got, enc.Len())
			}
			if enc.Len() > raftlog.MaxEntryBytes {
				t.Fatalf("max batch %d: built an entry of %d bytes, over raftlog.MaxEntryBytes %d", maxBatch, enc.Len(), raftlog.MaxEntryBytes)
			}
			if len(batch) > 1 && size > maxBatch {
				t.Fatalf("max batch %d: %d requests of %d bytes in one batch", maxBatch, len(batch), size)
			}
		}
		for i, s := range seqs {
			if s != uint64(i+1) {
				t.Fatalf("max batch %d: requests batched in order %v", maxBatch, seqs)
			}
		}
		if len(seqs) != len(sizes) {
			t.Fatalf("max batch %d: %d of %d requests batched", maxBatch, len(seqs), len(sizes))
		}
	}
}

func TestByteBudget(t *testing.T) {
	bb := Budget{Max: 100}
	if !bb.Take(60) || !bb.Take(40) {
		t.Fatal("refused within the budget")
	}
	if bb.Take(1) {
		t.Fatal("admitted past the budget")
	}
	if !bb.Full() {
		t.Fatal("100 of 100 bytes held: not full")
	}
	bb.Give(60)
	if bb.Full() {
		t.Fatal("40 of 100 bytes held: full")
	}
	if !bb.Take(50) || bb.Held() != 90 {
		t.Fatalf("after a release: held %d, want 90", bb.Held())
	}
	bb.Give(90)
	// A request larger than the whole budget goes through alone.
	if !bb.Take(500) {
		t.Fatal("an oversized request was refused with nothing held")
	}
	if bb.Take(1) {
		t.Fatal("admitted beside an oversized request")
	}
}

// Wait queues what does not fit and admits it in arrival order as bytes
// come back; a request that would wait beyond the bound is refused at
// once; one whose context ends leaves the line, and the next may go.
func TestByteBudgetWait(t *testing.T) {
	bb := Budget{Max: 100}
	ctx := context.Background()
	if !bb.Wait(ctx, 80) {
		t.Fatal("refused within the budget")
	}
	admitted := make(chan int, 2)
	var wg sync.WaitGroup
	for i, n := range []int{60, 10} { // queued in this order; 10 alone would fit
		wg.Add(1)
		go func() {
			defer wg.Done()
			if bb.Wait(ctx, n) {
				admitted <- n
			}
		}()
		waitFor(t, func() bool { return bb.Waiting() == []int{60, 70}[i] })
	}
	if !bb.Refuses(40) || bb.Refuses(30) {
		t.Fatal("with 70 bytes waiting of at most 100: Refuses does not tell 40 bytes (refused) from 30")
	}
	if bb.Wait(ctx, 40) {
		t.Fatal("admitted while 70 bytes were waiting, with at most 100 waiting")
	}
	// Take does not queue: 20 fits beside 80.
	if !bb.Take(20) {
		t.Fatal("Take refused 20 bytes beside 80")
	}
	bb.Give(20)
	select {
	case n := <-admitted:
		t.Fatalf("%d bytes admitted ahead of their turn", n)
	case <-time.After(50 * time.Millisecond):
	}
	bb.Give(80) // 60 and then 10 fit
	wg.Wait()
	if len(admitted) != 2 || bb.Held() != 70 || bb.Waiting() != 0 {
		t.Fatalf("admitted %d, held %d, waiting %d; want both, 70 held", len(admitted), bb.Held(), bb.Waiting())
	}
	bb.Give(70)
	bb.Take(80)

	// A waiter whose context ends leaves the line: the one behind it,
	// which fits, is admitted.
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan bool)
	go func() { gone <- bb.Wait(cctx, 90) }()
	waitFor(t, func() bool { return bb.Waiting() == 90 })
	next := make(chan bool)
	go func() { next <- bb.Wait(ctx, 10) }()
	waitFor(t, func() bool { return bb.Waiting() == 100 })
	cancel()
	if <-gone {
		t.Fatal("a waiter whose context ended was admitted with 80 of 100 held")
	}
	if !<-next {
		t.Fatal("the waiter behind a departed one was not admitted")
	}
	if bb.Held() != 90 || bb.Waiting() != 0 {
		t.Fatalf("held %d, waiting %d; want 90, 0", bb.Held(), bb.Waiting())
	}
	bb.Give(90)
	// An oversized request waits until nothing is held, then goes alone.
	bb.Take(10)
	big := make(chan bool)
	go func() { big <- bb.Wait(ctx, 500) }()
	waitFor(t, func() bool { return bb.Waiting() == 500 })
	bb.Give(10)
	if !<-big || bb.Held() != 500 {
		t.Fatalf("oversized request: held %d", bb.Held())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// heldFuture is an entry raft has not committed until commit closes.
type heldFuture struct {
	commit <-chan struct{}
	n      int
}

func (f heldFuture) Wait() ([]store.RequestResult, error) {
	<-f.commit
	return make([]store.RequestResult, f.n), nil
}

func (f heldFuture) Bytes() int { return 0 }

type heldWriter struct{ commit <-chan struct{} }

func (w heldWriter) Produce(reqs []*raftlog.Request, _ int, _ time.Duration) store.ProduceFuture {
	return heldFuture{commit: w.commit, n: len(reqs)}
}

// TestQueuedRequestHoldsItsBytesUntilAnswered: the bytes of a request the
// batcher has taken stay held while its entry is with raft, though nobody
// waits for its outcome any more (its caller timed out), and come back
// once the outcome is delivered.
func TestQueuedRequestHoldsItsBytesUntilAnswered(t *testing.T) {
	commit := make(chan struct{})
	bt := New(heldWriter{commit: commit}, Config{MaxBatchBytes: 1 << 20, MaxInflight: 4, QueueLen: 16, WriteTimeout: time.Second}, Hooks{})
	stop := make(chan struct{})
	defer close(stop)
	go bt.RunBatch(stop)
	go bt.RunComplete(stop)

	bb := Budget{Max: 4096}
	p := pendingOf(t, 1, 1000, make([]byte, 1000))
	if !bb.Take(p.Size) {
		t.Fatal("refused within the budget")
	}
	p.HeldIn(&bb)
	bt.In() <- p // and its caller stops waiting
	time.Sleep(50 * time.Millisecond)
	if got := bb.Held(); got != p.Size {
		t.Fatalf("with the entry in raft %d bytes held, want the request's %d", got, p.Size)
	}
	close(commit)
	waitFor(t, func() bool { return bb.Held() == 0 }) // given back with the outcome
	if out := <-p.Done(); out.Err != nil {
		t.Fatal(out.Err)
	}
}

// TestBudgetBoundByTime: while requests queue, the budget admits what the
// node answered in Target at the rate it answered them, between Floor and
// Max; answers under a light load do not count, and a faster rate raises
// the bound again.
func TestBudgetBoundByTime(t *testing.T) {
	bb := Budget{Max: 1000, Target: 500 * time.Millisecond, Floor: 100}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	// A light load (less than a quarter of the bound held) is answered
	// slowly because little is sent: that measures nothing.
	bb.Take(200)
	for i := range 3 {
		bb.GiveAt(10, at(1000*i))
	}
	if got := bb.Limit(); got != 1000 {
		t.Fatalf("after answers under a light load: limit %d, want Max", got)
	}
	bb.GiveAt(170, at(2000))

	if !bb.Take(900) {
		t.Fatal("refused within Max")
	}
	bb.GiveAt(100, at(3000)) // loaded: the measurement starts
	bb.GiveAt(100, at(3100))
	if got := bb.Limit(); got != 500 { // 1000 B/s x 0.5 s
		t.Fatalf("answering 1000 B/s while loaded: limit %d, want 500", got)
	}
	if bb.Take(1) || !bb.Full() { // 700 held
		t.Fatal("admitted past the time bound, or not full at it")
	}

	// Answering faster: the rate halves its way toward 4000 B/s (2500),
	// and the bound rises to Max.
	bb.GiveAt(400, at(3200))
	if got := bb.Limit(); got != 1000 {
		t.Fatalf("answering 4000 B/s: limit %d, want Max", got)
	}

	// Answering far slower than Floor allows: the bound stops at Floor.
	for i := range 10 {
		bb.Hold(10)
		bb.GiveAt(10, at(4200+1000*i))
	}
	if got := bb.Limit(); got != 100 {
		t.Fatalf("answering 10 B/s: limit %d, want Floor 100", got)
	}
}
