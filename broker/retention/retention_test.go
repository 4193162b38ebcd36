package retention

import (
	"errors"
	"testing"
	"time"

	"github.com/raftmq/raftmq/raftlog"
)

func TestCutFor(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	const mb = 1 << 20
	segs := []raftlog.Segment{{Base: 1, Bytes: mb}, {Base: 100, Bytes: mb}, {Base: 200, Bytes: mb}, {Base: 300, Bytes: mb}}
	// Entry i was appended 1000-i seconds ago: segment [1,100) ends 901 s ago,
	// [100,200) 801 s ago, [200,300) 701 s ago.
	at := func(i uint64) (time.Time, error) { return now.Add(-time.Duration(1000-i) * time.Second), nil }
	cases := []struct {
		name     string
		segs     []raftlog.Segment
		floor    uint64
		maxBytes int64
		maxAge   time.Duration
		want     uint64
		why      string
	}{
		{"within both limits", segs, 0, 4 * mb, time.Hour, 0, ""},
		{"size: keep the newest that fit", segs, 0, 2 * mb, 0, 200, "size"},
		{"size: never the tail", segs, 0, 1, 0, 300, "size"},
		{"age: segments whose newest entry is too old", segs, 0, 0, 750 * time.Second, 200, "age"},
		{"age: not the tail, however old", segs, 0, 0, time.Second, 300, "age"},
		{"both: the deeper cut wins", segs, 0, 3 * mb, 750 * time.Second, 200, "age"},
		{"deleted segments below the floor do not count again", segs, 200, 2 * mb, 0, 0, ""},
		{"a cut at or below the floor is nothing new", segs, 300, 1, time.Second, 0, ""},
		{"one segment: nothing to cut", segs[:1], 0, 1, time.Second, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cut, why := cutFor(c.segs, c.floor, c.maxBytes, c.maxAge, at, now)
			if cut != c.want || why != c.why {
				t.Fatalf("cut %d by %q, want %d by %q", cut, why, c.want, c.why)
			}
		})
	}
	// An entry without a time (or unreadable) stops the age scan there.
	unknown := func(i uint64) (time.Time, error) {
		if i >= 199 {
			return time.Time{}, errors.New("gone")
		}
		return at(i)
	}
	if cut, _ := cutFor(segs, 0, 0, time.Second, unknown, now); cut != 100 {
		t.Fatalf("age scan past an entry without a time: cut %d, want 100", cut)
	}
}
