package store

import (
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/raftlog"
)

type harness struct {
	t   *testing.T
	f   *FSM
	idx uint64
}

func newHarness(t *testing.T) *harness { return &harness{t: t, f: newFSM(nil, nil)} }

func (h *harness) apply(data []byte) interface{} {
	h.idx++
	return h.f.Apply(&raft.Log{Index: h.idx, Type: raft.LogCommand, Data: data})
}

func (h *harness) mustMeta(data []byte) {
	h.t.Helper()
	if res := h.apply(data); res != nil {
		h.t.Fatalf("meta command: %v", res)
	}
}

func (h *harness) produce(reqs ...*raftlog.Request) []*ProduceResult {
	h.t.Helper()
	res, ok := h.apply(raftlog.EncodeBatch(reqs...)).([]*ProduceResult)
	if !ok {
		h.t.Fatalf("batch result %T", res)
	}
	return res
}

func msgs(queue uint32, bodies ...string) []raftlog.Message {
	var out []raftlog.Message
	for _, b := range bodies {
		out = append(out, raftlog.Message{Queue: queue, Body: []byte(b)})
	}
	return out
}

func TestRejectsUnknownTopicAndBadQueue(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeCreateTopic("t", 2, false))
	res := h.produce(
		&raftlog.Request{Topic: "nope", Messages: msgs(0, "a")},
		&raftlog.Request{Topic: "t", Messages: msgs(5, "b")},
		&raftlog.Request{Topic: "t", Messages: msgs(1, "c")},
	)
	if !errors.Is(res[0].Err, ErrUnknownTopic) || !errors.Is(res[1].Err, ErrInvalidQueue) || res[2].Err != nil {
		t.Fatalf("errors %v / %v / %v", res[0].Err, res[1].Err, res[2].Err)
	}
	if err, _ := h.apply(EncodeCreateTopic("t", 3, false)).(error); !errors.Is(err, ErrTopicExists) {
		t.Fatalf("recreate: %v", err)
	}
	if h.apply(EncodeCreateTopic("t", 2, true)) != nil {
		t.Fatal("if-not-exists with same queues should succeed")
	}
	for _, name := range []string{"", "a b", "x/y", string(make([]byte, 200))} {
		if err, _ := h.apply(EncodeCreateTopic(name, 1, false)).(error); !errors.Is(err, ErrInvalidName) {
			t.Errorf("name %q: %v", name, err)
		}
	}
	if err, _ := h.apply([]byte{99, 1, 2}).(error); !errors.Is(err, ErrCorruptCommand) {
		t.Fatalf("unknown command: %v", err)
	}
}

func FuzzCheckCommand(f *testing.F) {
	f.Add(EncodeCreateTopic("t", 4, true))
	f.Add(EncodeCommitOffsets("g", []OffsetEntry{{Topic: "t", Queue: 1, Offset: 9}}))
	f.Add(EncodeRegisterNode(NodeInfo{ID: "n", ClientAddr: "x:1"}))
	f.Add(EncodeRetain(3))
	f.Add(EncodeRetainMins(3, &RetainMins{At: 1, Topics: []TopicMins{{Topic: "t", Mins: []uint64{0, 2, 9, 1, 4}}, {Topic: "u", Mins: []uint64{1}}}}))
	f.Add(EncodeRetainMins(3, nil))
	f.Add(EncodeLock("g", "m", []QueueRef{{Topic: "t", Queue: 1}}, time.Unix(1000, 0), time.Minute))
	f.Add(EncodeUnlock("g", "m", []QueueRef{{Topic: "t", Queue: 1}}, time.Unix(1000, 0)))
	f.Add(EncodeLockTerm(2))
	f.Add(raftlog.EncodeBatch(&raftlog.Request{Topic: "t", Messages: msgs(0, "a")}))
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CheckCommand(data)
		// Whatever passes the check must apply without panicking.
		h := newHarness(t)
		h.apply(EncodeCreateTopic("t", 4, false))
		res := h.apply(data)
		if err == nil {
			if e, ok := res.(error); ok && errors.Is(e, ErrCorruptCommand) {
				t.Fatalf("check passed but apply says corrupt: %v", e)
			}
		}
	})
}

// With AwaitStoredBy set, an entry is applied (and so answered) only once
// the log has it fsynced on this node; a failed fsync stops the state
// machine there, as a damaged entry does, instead of applying it.
func TestApplyWaitsForTheStoredEntry(t *testing.T) {
	h := newHarness(t)
	stored := make(chan struct{})
	var asked uint64
	h.f.AwaitStoredBy(func(idx uint64) error { asked = idx; <-stored; return nil })
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.mustMeta(EncodeCreateTopic("t", 1, false))
	}()
	select {
	case <-done:
		t.Fatal("applied before the log had the entry fsynced")
	case <-time.After(50 * time.Millisecond):
	}
	if h.f.Applied() != 0 {
		t.Fatalf("applied %d before the fsync", h.f.Applied())
	}
	close(stored)
	<-done
	if asked != 1 || h.f.Applied() != 1 {
		t.Fatalf("asked for %d, applied %d; want 1 and 1", asked, h.f.Applied())
	}

	h.f.AwaitStoredBy(func(uint64) error { return errors.New("injected fsync failure") })
	if err, _ := h.apply(EncodeCreateTopic("u", 1, false)).(error); !errors.Is(err, ErrDamaged) {
		t.Fatalf("after a failed fsync: %v, want ErrDamaged", err)
	}
	if h.f.Applied() != 1 {
		t.Fatalf("applied %d after a failed fsync, want 1", h.f.Applied())
	}
}
