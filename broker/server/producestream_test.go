package server_test

import (
	"math"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/api"
)

// TestProduceStreamServesCallsAsProduce: calls on one ProduceStream, at
// the leader and through a follower, are answered as Produce calls would
// be, each under its own id: many in flight at once, a reused sequence
// refused with its reason, a call without a request, and timeouts of any
// value (none, negative, absurdly long) carried without harm.
func TestProduceStreamServesCallsAsProduce(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.Leader()
	ctx := ctxT(t, 60*time.Second)
	for _, node := range []int{l, (l + 1) % 3} {
		cc, err := api.Dial(c.Config(node).Listen)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		st, err := api.NewBrokerClient(cc).ProduceStream(ctx)
		if err != nil {
			t.Fatal(err)
		}
		const n = 200
		producer := "ps-" + c.Config(node).Raft.ID
		calls := map[uint64]*api.ProduceCall{}
		for i := range uint64(n) {
			call := &api.ProduceCall{Id: 1000 + i, Request: &api.ProduceRequest{Topic: "ps", ProducerId: producer, Sequence: i + 1,
				Messages: []*api.ProduceMessage{{Body: []byte{byte(i)}}, {Body: []byte{byte(i), 1}}}, PackedAcks: i%2 == 0}}
			switch i % 4 {
			case 1:
				call.TimeoutMs = -5
			case 2:
				call.TimeoutMs = math.MaxInt64
			case 3:
				call.TimeoutMs = 30_000
			}
			calls[call.Id] = call
			if err := st.Send(call); err != nil {
				t.Fatal(err)
			}
		}
		reused := &api.ProduceCall{Id: 1, Request: &api.ProduceRequest{Topic: "ps", ProducerId: producer, Sequence: 1,
			Messages: []*api.ProduceMessage{{Body: []byte("other")}}}}
		empty := &api.ProduceCall{Id: 2}
		for _, call := range []*api.ProduceCall{reused, empty} {
			if err := st.Send(call); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.CloseSend(); err != nil {
			t.Fatal(err)
		}
		answered := map[uint64]bool{}
		for range n + 2 {
			r, err := st.Recv()
			if err != nil {
				t.Fatalf("node %d: stream ended after %d replies: %v", node, len(answered), err)
			}
			if answered[r.Id] {
				t.Fatalf("node %d: call %d answered twice", node, r.Id)
			}
			answered[r.Id] = true
			switch r.Id {
			case reused.Id:
				if !hasReason(r.Error.Err(), codes.InvalidArgument, api.ReasonSequenceReused) {
					t.Errorf("node %d: reused sequence answered %v, want InvalidArgument with reason %s", node, r.Error.Err(), api.ReasonSequenceReused)
				}
				continue
			case empty.Id:
				if status.Code(r.Error.Err()) != codes.InvalidArgument {
					t.Errorf("node %d: a call without a request answered %v, want InvalidArgument", node, r.Error.Err())
				}
				continue
			}
			call, ok := calls[r.Id]
			if !ok {
				t.Fatalf("node %d: reply to call %d, which was not made", node, r.Id)
			}
			if err := r.Error.Err(); err != nil {
				t.Fatalf("node %d: call %d (timeout %d ms): %v", node, r.Id, call.TimeoutMs, err)
			}
			acks := r.Response.GetAcks()
			if r.Id%2 == 0 { // asked packed
				if acks, err = r.Response.GetPackedAcks().Unpack(2); err != nil {
					t.Fatalf("node %d: call %d: %v", node, r.Id, err)
				}
			}
			if len(acks) != 2 || acks[0].Id == "" || acks[0].Id == acks[1].Id {
				t.Fatalf("node %d: call %d acks %v, want two with their ids", node, r.Id, acks)
			}
		}
		if _, err := st.Recv(); err == nil {
			t.Fatalf("node %d: a reply beyond the calls made", node)
		}
	}
}

func hasReason(err error, code codes.Code, reason string) bool {
	st := status.Convert(err)
	if st.Code() != code {
		return false
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Reason == reason {
			return true
		}
	}
	return false
}
