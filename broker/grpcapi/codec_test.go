package grpcapi

import (
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
)

// codecStream is a server stream whose RecvMsg hands msgs, encoded, to the
// nodes' codec, as gRPC does with what arrives.
type codecStream struct {
	grpc.ServerStream
	msgs [][]byte
}

func (s *codecStream) RecvMsg(m any) error {
	b := s.msgs[0]
	s.msgs = s.msgs[1:]
	return newServerCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, m)
}

func encodedCall(t testing.TB, c *api.ProduceCall) []byte {
	b, err := proto.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecvCallRefusesUndecoded: a call the node would refuse busy is
// answered with its id and ResourceExhausted (what the SDK retries)
// without being decoded; any other call is decoded whole.
func TestRecvCallRefusesUndecoded(t *testing.T) {
	call := &api.ProduceCall{Id: 7, TimeoutMs: 2000, Request: &api.ProduceRequest{Topic: "t", ProducerId: "p", Sequence: 3,
		Messages: []*api.ProduceMessage{{Key: "k", Body: make([]byte, 100<<10), Properties: map[string]string{"a": "b"}}}}}
	b := encodedCall(t, call)
	var asked int
	busy := func(n int) error {
		asked = n
		return broker.ErrBusy
	}
	st := &codecStream{msgs: [][]byte{b, b}}
	c, refused, err := recvCall(st, busy)
	if err != nil || c != nil || refused == nil {
		t.Fatalf("refused call: %v, %v, %v; want only a reply", c, refused, err)
	}
	if refused.Id != 7 || codes.Code(refused.Error.GetCode()) != codes.ResourceExhausted || asked != len(b) {
		t.Fatalf("reply %v after asking about %d bytes; want id 7, ResourceExhausted, %d bytes", refused, asked, len(b))
	}
	c, refused, err = recvCall(st, func(int) error { return nil })
	if err != nil || refused != nil || !proto.Equal(c, call) {
		t.Fatalf("admitted call: %v, %v, %v; want it decoded whole", c, refused, err)
	}
}

// A call without an id (or not a ProduceCall at all) is decoded, so that
// whatever is wrong with it is reported as for any other message.
func TestRecvCallWithoutIDIsDecoded(t *testing.T) {
	busy := func(int) error { return errors.New("busy") }
	st := &codecStream{msgs: [][]byte{encodedCall(t, &api.ProduceCall{Request: &api.ProduceRequest{Topic: "t"}}), {0xff, 0xff}}}
	if c, refused, err := recvCall(st, busy); err != nil || refused != nil || c.GetRequest().GetTopic() != "t" {
		t.Fatalf("call without an id: %v, %v, %v; want it decoded", c, refused, err)
	}
	if _, _, err := recvCall(st, busy); err == nil {
		t.Fatal("garbage decoded without error")
	}
}

// FuzzCallID: callID never panics, and finds the id of any encoded call.
func FuzzCallID(f *testing.F) {
	f.Add(encodedCall(f, &api.ProduceCall{Id: 1, TimeoutMs: 5, Request: &api.ProduceRequest{Topic: "x"}}), uint64(1))
	f.Add([]byte{0x08}, uint64(0))
	f.Add([]byte{0x1a, 0x80, 0x80, 0x80, 0x80, 0x10}, uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, id uint64) {
		callID(b)
		if id == 0 {
			return
		}
		enc := encodedCall(t, &api.ProduceCall{Id: id, TimeoutMs: int64(len(b)), Request: &api.ProduceRequest{Messages: []*api.ProduceMessage{{Body: b}}}})
		if got, ok := callID(enc); !ok || got != id {
			t.Fatalf("callID of a call with id %d: %d, %v", id, got, ok)
		}
	})
}
