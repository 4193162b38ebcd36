package grpcapi

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// serverCodec is the nodes' gRPC codec: protobuf, as gRPC's own, except
// that a *rawMessage receives its message's bytes undecoded. ProduceStream
// reads its calls so: under a flood it refuses, busy, calls it would
// refuse anyway before paying for their decoding (most of a flooded
// leader's CPU went to decoding requests it then refused).
type serverCodec struct{ encoding.CodecV2 }

func newServerCodec() serverCodec { return serverCodec{encoding.GetCodecV2(proto.Name)} }

func (c serverCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if r, ok := v.(*rawMessage); ok {
		r.buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
		return nil
	}
	return c.CodecV2.Unmarshal(data, v)
}

// rawMessage is one received message's bytes, in a pooled buffer; Free
// gives the buffer back.
type rawMessage struct{ buf mem.Buffer }

func (r *rawMessage) Bytes() []byte { return r.buf.ReadOnlyData() }

func (r *rawMessage) Free() {
	if r.buf != nil {
		r.buf.Free()
		r.buf = nil
	}
}
