package grpcapi

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// Packed acks unpack to what the plain acks say: ids, queues, offsets that
// go up and down between queues, and delivery times.
func TestPackedAcksRoundTrip(t *testing.T) {
	const index, ordinal = 0x1F2E3D, 7
	queues := []uint32{3, 0, 3, 1023, 0, 3}
	offsets := []uint64{900, 12, 901, 1 << 40, 13, 902}
	for _, delayed := range []bool{false, true} {
		var res broker.ProduceResult
		for i := range queues {
			res.Acks = append(res.Acks, store.Ack{Queue: queues[i], Offset: offsets[i], Index: index, Ordinal: ordinal + uint32(i)})
			if delayed {
				res.DeliverAt = append(res.DeliverAt, 1_800_000_000_000+int64(i))
			}
		}
		// Through the wire, as a client gets it.
		data, err := proto.Marshal(&api.ProduceResponse{PackedAcks: packAcks(&res)})
		if err != nil {
			t.Fatal(err)
		}
		var resp api.ProduceResponse
		if err := proto.Unmarshal(data, &resp); err != nil {
			t.Fatal(err)
		}
		acks, err := resp.PackedAcks.Unpack(len(queues))
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range acks {
			want := &api.Ack{Queue: int32(queues[i]), Offset: offsets[i], Id: raftlog.MessageID(index, ordinal+uint32(i))}
			if delayed {
				want.DeliverAtMs = res.DeliverAt[i]
			}
			if !proto.Equal(a, want) {
				t.Errorf("delayed %v, ack %d: %v, want %v", delayed, i, a, want)
			}
		}
		if _, err := resp.PackedAcks.Unpack(len(queues) + 1); err == nil {
			t.Errorf("delayed %v: unpacking for one message more than were acked succeeded", delayed)
		}
	}
}

// Acks that do not name consecutive messages of one entry cannot be packed:
// the node answers them one by one.
func TestPackAcksRefusesWhatItCannotSay(t *testing.T) {
	for _, acks := range [][]store.Ack{
		nil,
		{{Index: 5, Ordinal: 0}, {Index: 5, Ordinal: 2}},
		{{Index: 5, Ordinal: 0}, {Index: 6, Ordinal: 1}},
	} {
		if p := packAcks(&broker.ProduceResult{Acks: acks}); p != nil {
			t.Errorf("%v packed as %v", acks, p)
		}
	}
}

// Packed acks cost a few bytes a message where plain acks cost about 35.
func TestPackedAcksSize(t *testing.T) {
	const n = 1000
	var res broker.ProduceResult
	plain := &api.ProduceResponse{}
	for i := range n {
		a := store.Ack{Queue: uint32(i % 8), Offset: 5_000_000 + uint64(i/8), Index: 1 << 30, Ordinal: uint32(i)}
		res.Acks = append(res.Acks, a)
		plain.Acks = append(plain.Acks, &api.Ack{Queue: int32(a.Queue), Offset: a.Offset, Id: a.ID()})
	}
	packed := proto.Size(&api.ProduceResponse{PackedAcks: packAcks(&res)})
	if full := proto.Size(plain); packed*10 > full {
		t.Errorf("%d messages: packed acks %d bytes, plain %d: want less than a tenth", n, packed, full)
	}
}

// FuzzPackedAcks: whatever a broker answers, unpacking it neither panics nor
// returns another number of acks than asked for.
func FuzzPackedAcks(f *testing.F) {
	seed, _ := proto.Marshal(&api.PackedAcks{EntryIndex: 9, FirstOrdinal: 1, Queues: []uint32{1, 2}, OffsetDeltas: []int64{5, -3}, DeliverAtMs: []int64{1, 2}})
	f.Add(seed, 2)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, data []byte, n int) {
		var p api.PackedAcks
		if proto.Unmarshal(data, &p) != nil || n > 1<<16 {
			return
		}
		acks, err := p.Unpack(n)
		if err == nil && len(acks) != n {
			t.Fatalf("%d acks for %d messages", len(acks), n)
		}
	})
}
