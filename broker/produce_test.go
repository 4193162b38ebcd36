package broker

import "testing"

func TestByteBudget(t *testing.T) {
	var bb byteBudget
	if !bb.take(60, 100) || !bb.take(40, 100) {
		t.Fatal("refused within the budget")
	}
	if bb.take(1, 100) {
		t.Fatal("admitted past the budget")
	}
	bb.give(60)
	if !bb.take(50, 100) || bb.held() != 90 {
		t.Fatalf("after a release: held %d, want 90", bb.held())
	}
	bb.give(90)
	// A request larger than the whole budget goes through alone.
	if !bb.take(500, 100) {
		t.Fatal("an oversized request was refused with nothing held")
	}
	if bb.take(1, 100) {
		t.Fatal("admitted beside an oversized request")
	}
}
