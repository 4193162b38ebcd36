package raftlog

import (
	"math/bits"

	"github.com/hashicorp/raft-wal/segment"
)

// MaxEntryBytes is the largest Raft entry raftmq ever hands to raft: the
// largest record raft-wal reads back (segment.MaxEntrySize, 64 MiB; a
// larger one is written but fails every read as corrupt, so its leader can
// never replicate it) less 1 MiB for raft's own framing of the entry (index,
// term, type, extensions, timestamp). bolt's limit (about 2 GiB per value)
// is far above it, so one bound serves both log stores.
const MaxEntryBytes = segment.MaxEntrySize - 1<<20

// BatchOverhead is the size of a batch entry with no requests in it: an
// entry of requests r1..rn is BatchOverhead + the sum of their
// Request.EncodedSize. It is the header of the format written
// (batchWriteVersion): 10 bytes for version 1, 6 for version 2.
const BatchOverhead = batchHeaderLen - (batchWriteVersion-batchVersion1)*(batchHeaderLen-batchV2HeaderLen)

// EncodedSize is the exact number of bytes BatchBuilder.Add appends for r.
func (r *Request) EncodedSize() int { return r.encodedSize(batchWriteVersion) }

func (r *Request) encodedSize(version byte) int {
	n := stringSize(len(r.ProducerID)) + uvarintSize(r.Seq) + stringSize(len(r.Topic)) + uvarintSize(uint64(len(r.Messages)))
	for i := range r.Messages {
		n += r.Messages[i].encodedSize(version)
	}
	return n
}

// EncodedSize is the exact number of bytes one message takes in a batch.
func (m *Message) EncodedSize() int { return m.encodedSize(batchWriteVersion) }

func (m *Message) encodedSize(version byte) int {
	n := uvarintSize(uint64(m.Queue)) + varintSize(m.Timestamp) + stringSize(len(m.Body))
	for k, v := range m.Properties {
		n += stringSize(len(k)) + stringSize(len(v))
	}
	if version == batchVersion1 {
		return n + stringSize(len(m.Key)) + stringSize(len(m.Tag)) + uvarintSize(uint64(len(m.Properties)))
	}
	n++ // flags
	if m.Key != "" {
		n += stringSize(len(m.Key))
	}
	if m.Tag != "" {
		n += stringSize(len(m.Tag))
	}
	if len(m.Properties) > 0 {
		n += uvarintSize(uint64(len(m.Properties)))
	}
	return n
}

// stringSize is the encoded size of a length-prefixed string of n bytes.
func stringSize(n int) int { return uvarintSize(uint64(n)) + n }

// uvarintSize is len(binary.AppendUvarint(nil, v)) without encoding.
func uvarintSize(v uint64) int {
	if v == 0 {
		return 1
	}
	return (bits.Len64(v) + 6) / 7
}

// varintSize is len(binary.AppendVarint(nil, v)) without encoding.
func varintSize(v int64) int {
	ux := uint64(v) << 1 // zigzag, as binary.AppendVarint does
	if v < 0 {
		ux = ^ux
	}
	return uvarintSize(ux)
}
