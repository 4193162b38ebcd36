package store

import "testing"

// TestProducerNumbersHandedOutOnceAndSnapshotted: each number_producer
// command hands out the next number, and a node restored from a snapshot
// goes on after the last one handed out, never giving one again.
func TestProducerNumbersHandedOutOnceAndSnapshotted(t *testing.T) {
	h := newHarness(t)
	for want := uint64(0); want < 3; want++ {
		if got, ok := h.apply(EncodeNumberProducer()).(uint64); !ok || got != want {
			t.Fatalf("number %v, want %d", got, want)
		}
	}
	f2, _ := snapshotRoundTrip(t, h.f)
	h.f = f2
	if got, ok := h.apply(EncodeNumberProducer()).(uint64); !ok || got != 3 {
		t.Fatalf("after restore: number %v, want 3", got)
	}
}
