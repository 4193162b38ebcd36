package broker

import (
	"testing"
	"time"
)

func TestAppliedHistoryBehind(t *testing.T) {
	var h appliedHistory
	t0 := time.Unix(1000, 0)
	for i := 0; i < 400; i++ { // more than the ring holds
		h.record(t0.Add(time.Duration(i)*200*time.Millisecond), uint64(10*i))
	}
	now := t0.Add(400 * 200 * time.Millisecond)
	if d := h.behind(now, 10*399); d != 0 {
		t.Errorf("a follower with everything is %v behind", d)
	}
	// It lacks what the leader applied at sample 390 (index 3900).
	if d := h.behind(now, 3895); d != 2*time.Second {
		t.Errorf("behind %v, want 2s (the leader applied past it 10 samples ago)", d)
	}
	// Older than the history (the ring keeps the last 300 samples).
	if d := h.behind(now, 5); d != 60*time.Second {
		t.Errorf("behind %v, want the whole history, 60s", d)
	}
}
