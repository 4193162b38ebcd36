package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/raftlog"
)

// doneFuture is an election.ApplyFuture that has completed.
type doneFuture struct {
	err   error
	index uint64
	resp  interface{}
}

func (f doneFuture) Error() error          { return f.err }
func (f doneFuture) Index() uint64         { return f.index }
func (f doneFuture) Response() interface{} { return f.resp }

// TestProduceFutureTypesTheAnswer: Wait turns the state machine's answer
// for a batch into one result per request, with acks.
func TestProduceFutureTypesTheAnswer(t *testing.T) {
	reqs := []*raftlog.Request{
		{Topic: "t", Messages: []raftlog.Message{{Queue: 1}, {Queue: 0}, {Queue: 1}}},
		{Topic: "missing", Messages: []raftlog.Message{{Queue: 0}}},
	}
	answer := []*ProduceResult{
		{LogIndex: 7, Ordinal: 0, Count: 3, Bases: []QueueBase{{Queue: 1, Count: 2, Base: 10}, {Queue: 0, Count: 1, Base: 4}}},
		{LogIndex: 7, Ordinal: 3, Count: 1, Err: fmt.Errorf("%w: %q", ErrUnknownTopic, "missing")},
	}
	res, err := (&produceFuture{f: doneFuture{index: 7, resp: answer}, reqs: reqs}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results for 2 requests", len(res))
	}
	want := []Ack{{Queue: 1, Offset: 10, Index: 7, Ordinal: 0}, {Queue: 0, Offset: 4, Index: 7, Ordinal: 1}, {Queue: 1, Offset: 11, Index: 7, Ordinal: 2}}
	if fmt.Sprint(res[0].Acks) != fmt.Sprint(want) || res[0].Err != nil {
		t.Errorf("request 0: %+v, want acks %v", res[0], want)
	}
	if !errors.Is(res[1].Err, ErrUnknownTopic) || res[1].Acks != nil {
		t.Errorf("request 1: %+v, want ErrUnknownTopic and no acks", res[1])
	}

	// A retry whose queues are not the first attempt's gets no acks.
	mismatch := []*raftlog.Request{{Topic: "t", Messages: []raftlog.Message{{Queue: 2}}}}
	dup := []*ProduceResult{{LogIndex: 7, Count: 1, Duplicate: true, Bases: []QueueBase{{Queue: 1, Count: 1, Base: 10}}}}
	res, err = (&produceFuture{f: doneFuture{resp: dup}, reqs: mismatch}).Wait()
	if err != nil || !errors.Is(res[0].Err, ErrMismatchedRetry) || res[0].Acks != nil {
		t.Errorf("mismatched retry: %+v %v, want ErrMismatchedRetry", res, err)
	}
}

func TestProduceFutureErrors(t *testing.T) {
	reqs := []*raftlog.Request{{Topic: "t", Messages: []raftlog.Message{{}}}}
	for _, tc := range []struct {
		name string
		f    doneFuture
		want error
		text string
	}{
		{"raft refused", doneFuture{err: ErrNotLeader}, ErrNotLeader, ""},
		{"damaged entry", doneFuture{resp: fmt.Errorf("entry 3: %w", ErrDamaged)}, ErrDamaged, ""},
		{"wrong count", doneFuture{resp: []*ProduceResult{}}, nil, "0 results for a batch of 1"},
		{"wrong type", doneFuture{resp: 42}, nil, "answered int"},
	} {
		_, err := (&produceFuture{f: tc.f, reqs: reqs}).Wait()
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want %v %q", tc.name, err, tc.want, tc.text)
		}
	}
}

// TestProduceRefusesOversizedEntry: an entry the log store could not read
// back is refused before raft sees it.
func TestProduceRefusesOversizedEntry(t *testing.T) {
	s := &Store{log: hclog.NewNullLogger()}
	big := &raftlog.Request{Topic: "t", Messages: []raftlog.Message{{Body: make([]byte, raftlog.MaxEntryBytes)}}}
	_, err := s.Produce([]*raftlog.Request{big}, big.EncodedSize(), 0).Wait()
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized batch: %v, want ErrTooLarge", err)
	}
}
