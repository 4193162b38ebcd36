package store

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"testing"
	"time"
)

const testLease = 60 * time.Second

var lockT0 = time.Unix(1000, 0)

// lock applies a lock command and returns the queues granted.
func (h *harness) lock(group, member string, at time.Time, qs ...QueueRef) []QueueRef {
	h.t.Helper()
	res := h.apply(EncodeLock(group, member, qs, at, testLease))
	g, ok := res.(*lockGrant)
	if !ok {
		h.t.Fatalf("lock %s %s %v: answer %T %v", group, member, qs, res, res)
	}
	return g.granted
}

func (h *harness) holder(group string, q QueueRef) string {
	m, _, _ := h.f.LockHolder(group, q)
	return m
}

// TestLockGrants: one holder per queue and group; the holder's renewals
// keep it and move its expiry forward, never back; another member gets the
// queue once the lock expired by the command's clock or after an unlock by
// its holder; queues of topics that do not exist are not granted.
func TestLockGrants(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 3, false))
	q0, q1, q2 := QueueRef{"t", 0}, QueueRef{"t", 1}, QueueRef{"t", 2}
	str := func(qs []QueueRef) string { return fmt.Sprint(qs) }

	if got := h.lock("g", "a", lockT0, q0, q1, QueueRef{"t", 3}, QueueRef{"nope", 0}); str(got) != str([]QueueRef{q0, q1}) {
		t.Fatalf("a's first lock: %v, want q0 q1", got)
	}
	if got := h.lock("g", "b", lockT0.Add(time.Second), q0, q1, q2); str(got) != str([]QueueRef{q2}) {
		t.Fatalf("b while a holds q0 q1: %v, want q2", got)
	}
	if got := h.lock("other", "b", lockT0.Add(time.Second), q0); len(got) != 1 {
		t.Fatalf("another group's lock: %v", got)
	}
	// a renews q0 late in its lease; q1 lapses.
	if got := h.lock("g", "a", lockT0.Add(50*time.Second), q0); len(got) != 1 {
		t.Fatalf("a's renewal: %v", got)
	}
	if _, exp, _ := h.f.LockHolder("g", q0); !exp.Equal(lockT0.Add(110 * time.Second)) {
		t.Fatalf("q0 expires %v after the renewal, want %v", exp, lockT0.Add(110*time.Second))
	}
	// A renewal stamped earlier (another leader's clock behind) keeps the later expiry.
	if got := h.lock("g", "a", lockT0.Add(40*time.Second), q0); len(got) != 1 {
		t.Fatalf("a's renewal behind: %v", got)
	}
	if _, exp, _ := h.f.LockHolder("g", q0); !exp.Equal(lockT0.Add(110 * time.Second)) {
		t.Fatalf("q0 expires %v after an earlier-stamped renewal, want %v kept", exp, lockT0.Add(110*time.Second))
	}
	// At exactly the expiry the lock is gone.
	if got := h.lock("g", "b", lockT0.Add(60*time.Second), q0, q1); str(got) != str([]QueueRef{q1}) {
		t.Fatalf("b after a's q1 expired: %v, want q1", got)
	}
	h.mustMeta(EncodeUnlock("g", "b", []QueueRef{q0}, lockT0.Add(61*time.Second))) // not b's: ignored
	if h.holder("g", q0) != "a" {
		t.Fatalf("q0 held by %q after b's unlock, want a", h.holder("g", q0))
	}
	h.mustMeta(EncodeUnlock("g", "a", []QueueRef{q0}, lockT0.Add(62*time.Second)))
	if got := h.lock("g", "b", lockT0.Add(62*time.Second), q0); len(got) != 1 {
		t.Fatalf("b after a unlocked q0: %v", got)
	}
	// Expired holders of the group are dropped when the group is touched.
	h.lock("g", "c", lockT0.Add(500*time.Second))
	if n := len(h.f.locks["g"]); n != 0 {
		t.Fatalf("%d holders of g left after every lock expired", n)
	}
	if _, ok := h.f.locks["g"]; ok {
		t.Fatal("an empty table of g is kept")
	}
}

// TestLockDeterministic: two state machines applying the same commands
// hold the same table: apply reads only the commands' clock.
func TestLockDeterministic(t *testing.T) {
	cmds := [][]byte{
		EncodeCreateTopic("t", 2, false),
		EncodeLock("g", "a", []QueueRef{{"t", 0}, {"t", 1}}, lockT0, testLease),
		EncodeLock("g", "b", []QueueRef{{"t", 0}, {"t", 1}}, lockT0.Add(time.Minute), testLease),
		EncodeLock("g", "a", []QueueRef{{"t", 1}}, lockT0.Add(time.Minute+time.Second), testLease),
	}
	var tables []string
	for range 2 {
		h := newHarness(t)
		for _, c := range cmds {
			h.apply(c)
			time.Sleep(time.Millisecond)
		}
		tables = append(tables, fmt.Sprint(h.f.locks))
	}
	if tables[0] != tables[1] {
		t.Fatalf("tables differ:\n%s\n%s", tables[0], tables[1])
	}
}

// TestLockDroppedWithTopicAndGroup: deleting a topic drops the locks on its
// queues, deleting a group drops the group's locks.
func TestLockDroppedWithTopicAndGroup(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 1, false))
	h.mustMeta(EncodeCreateTopic("u", 1, false))
	h.lock("g", "a", lockT0, QueueRef{"t", 0}, QueueRef{"u", 0})
	h.lock("g2", "a", lockT0, QueueRef{"t", 0})
	h.mustMeta(EncodeDeleteTopic("t"))
	if h.holder("g", QueueRef{"t", 0}) != "" || h.holder("g2", QueueRef{"t", 0}) != "" {
		t.Fatal("a lock on a deleted topic's queue is kept")
	}
	if _, ok := h.f.locks["g2"]; ok {
		t.Fatal("g2's empty table is kept")
	}
	h.mustMeta(EncodeDeleteGroup("g", nil))
	if h.holder("g", QueueRef{"u", 0}) != "" {
		t.Fatal("a deleted group's lock is kept")
	}
}

// TestLockCommandChecks: commands no broker writes are refused alike on
// every node, before or at apply; the lock_term command older versions
// wrote still applies, changing nothing.
func TestLockCommandChecks(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 1, false))
	for name, cmd := range map[string][]byte{
		"no member":  EncodeLock("g", "", []QueueRef{{"t", 0}}, lockT0, testLease),
		"no lease":   EncodeLock("g", "a", []QueueRef{{"t", 0}}, lockT0, 0),
		"unlock nil": EncodeUnlock("g", "", nil, lockT0),
	} {
		if err := CheckCommand(cmd); !errors.Is(err, ErrCorruptCommand) {
			t.Errorf("%s: check %v, want ErrCorruptCommand", name, err)
		}
		if err, _ := h.apply(cmd).(error); err == nil {
			t.Errorf("%s: applied", name)
		}
	}
	if err, _ := h.apply(EncodeLock("bad name!", "a", []QueueRef{{"t", 0}}, lockT0, testLease)).(error); !errors.Is(err, ErrInvalidName) {
		t.Errorf("bad group: %v, want ErrInvalidName", err)
	}
	h.mustMeta(EncodeLockTerm(3))
	if len(h.f.locks) != 0 {
		t.Fatalf("locks %v after refused commands", h.f.locks)
	}
	if at, _ := h.f.Damaged(); at != 0 {
		t.Fatal("a refused lock command marked the state machine damaged")
	}
}

// TestLockAnswerTyped: a lock's grant comes back through Pending as an
// answer, and Wait takes it for a success.
func TestLockAnswerTyped(t *testing.T) {
	grant := &lockGrant{granted: []QueueRef{{"t", 0}}}
	_, resp, err := Pending{doneFuture{index: 4, resp: grant}}.answer()
	if err != nil || resp != grant {
		t.Fatalf("answer %v %v, want the grant", resp, err)
	}
	if _, err := (Pending{doneFuture{index: 4, resp: grant}}).Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if _, _, err := (Pending{doneFuture{resp: fmt.Errorf("entry 3: %w", ErrDamaged)}}).answer(); !errors.Is(err, ErrDamaged) {
		t.Fatalf("damaged: %v", err)
	}
}

// TestLockSnapshot: a snapshot carries the held locks; snapshots without
// the table (format 1 from testdata, and one that still carries the lock
// term older versions wrote) restore none, replacing what the node held.
func TestLockSnapshot(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	h.lock("g", "a", lockT0, QueueRef{"t", 0})
	h.lock("g", "b", lockT0, QueueRef{"t", 1})
	h.lock("g2", "c", lockT0, QueueRef{"t", 0})
	f2, _ := snapshotRoundTrip(t, h.f)
	if fmt.Sprint(f2.locks) != fmt.Sprint(h.f.locks) {
		t.Fatalf("restored locks %v, want %v", f2.locks, h.f.locks)
	}
	if m, exp, ok := f2.LockHolder("g", QueueRef{"t", 1}); !ok || m != "b" || !exp.Equal(lockT0.Add(testLease)) {
		t.Fatalf("restored g t/1: %q %v %v", m, exp, ok)
	}

	// The restored table grants as the original would.
	h2 := &harness{t: t, f: f2, idx: h.idx}
	if got := h2.lock("g", "x", lockT0.Add(time.Second), QueueRef{"t", 0}); len(got) != 0 {
		t.Fatalf("x took a's restored lock: %v", got)
	}

	type oldSnapState struct { // what older versions wrote: a lock term, no table
		Format   int
		LockTerm uint64
	}
	var buf bytes.Buffer
	hsum := crc32.New(castagnoli)
	bw := bufio.NewWriter(io.MultiWriter(&buf, hsum))
	if err := gob.NewEncoder(bw).Encode(&oldSnapState{Format: 5, LockTerm: 9}); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	crc := hsum.Sum32()
	buf.Write([]byte{byte(crc >> 24), byte(crc >> 16), byte(crc >> 8), byte(crc)})
	old, err := os.ReadFile("testdata/snapshot-format1.bin")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"format 1": old, "lock term": buf.Bytes()} {
		h := newHarness(t)
		h.mustMeta(EncodeCreateTopic("t", 1, false))
		h.lock("g", "a", lockT0, QueueRef{"t", 0})
		if err := h.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatalf("%s: restore: %v", name, err)
		}
		if len(h.f.locks) != 0 {
			t.Fatalf("%s: locks %v after restore, want none", name, h.f.locks)
		}
	}
}
