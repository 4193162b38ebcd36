package raftlog

import (
	"math/bits"
	"time"

	"github.com/hashicorp/raft-wal/segment"
)

// MaxEntryBytes is the largest Raft entry raftmq ever hands to raft: the
// largest record raft-wal reads back (segment.MaxEntrySize, 64 MiB; a
// larger one is written but fails every read as corrupt, so its leader can
// never replicate it) less 1 MiB for raft's own framing of the entry (index,
// term, type, extensions, timestamp). bolt's limit (about 2 GiB per value)
// is far above it, so one bound serves both log stores.
const MaxEntryBytes = segment.MaxEntrySize - 1<<20

// BatchOverhead is the size of a version 1 batch entry with no requests in
// it: an entry of requests r1..rn is BatchOverhead + the sum of their
// Request.EncodedSize in version 1, and at most that in the version
// SmallestVersion picks.
const BatchOverhead = batchHeaderLen

// EncodedSize is the exact number of bytes BatchBuilder.Add appends for r
// in version 1 (a message without a timestamp counted with the clock's).
// Versions 2 and 3 take one byte more for a message with a key, a tag and
// properties, so BatchOverhead plus the sum of EncodedSize bounds a batch
// only in the version SmallestVersion chose for it.
func (r *Request) EncodedSize() int { return r.encodedSize(batchVersion1) }

// SmallestVersion is the version, of those up to max, in which reqs encode
// to the fewest bytes (the later version on a tie): never more than
// BatchOverhead + the sum of their EncodedSize. It costs a step per
// message, not an encoding.
func SmallestVersion(max BatchVersion, reqs []*Request) BatchVersion {
	if max < BatchV2 {
		return BatchV1
	}
	// Version 2 has no request count, and per message one flags byte in
	// place of a zero length for each of a key, a tag and properties that
	// is absent. Version 3 is version 2 less the timestamp of every
	// message stamped with its entry's time, and less what a numbered
	// producer's id takes beyond its number.
	diff := batchV2HeaderLen - batchHeaderLen
	saved, now := 0, 0 // bytes version 3 saves over version 2; nowSize
	for _, r := range reqs {
		saved += r.producerSize(batchVersion2) - r.producerSize(batchVersion3)
		for i := range r.Messages {
			m := &r.Messages[i]
			diff++
			if m.Key == "" {
				diff--
			}
			if m.Tag == "" {
				diff--
			}
			if len(m.Properties) == 0 {
				diff--
			}
			if m.Timestamp == 0 {
				if now == 0 {
					now = nowSize()
				}
				saved += now
			}
		}
	}
	if max >= BatchV3 {
		diff -= saved
	}
	switch {
	case diff > 0:
		return BatchV1
	case max >= BatchV3:
		return BatchV3
	}
	return BatchV2
}

func (r *Request) encodedSize(version byte) int {
	n := r.producerSize(version) + uvarintSize(r.Seq) + stringSize(len(r.Topic)) + uvarintSize(uint64(len(r.Messages)))
	now := 0 // nowSize, read once the first message needs it
	for i := range r.Messages {
		m := &r.Messages[i]
		if now == 0 && m.Timestamp == 0 && version != batchVersion3 {
			now = nowSize()
		}
		n += m.encodedSize(version, now)
	}
	return n
}

// producerSize is the size of r's producer id in a batch of version.
func (r *Request) producerSize(version byte) int {
	if version != batchVersion3 {
		return stringSize(len(r.ProducerID))
	}
	if n, ok := producerNumber(r.ProducerID); ok {
		return uvarintSize(numberedProducer + n)
	}
	return stringSize(len(r.ProducerID))
}

// EncodedSize is the exact number of bytes one message takes in a version 1
// batch (see Request.EncodedSize).
func (m *Message) EncodedSize() int {
	now := 0
	if m.Timestamp == 0 {
		now = nowSize()
	}
	return m.encodedSize(batchVersion1, now)
}

// nowSize is the size of the timestamp a version 1 or 2 builder gives a
// message without one.
func nowSize() int { return varintSize(time.Now().UnixMilli()) }

func (m *Message) encodedSize(version byte, nowSize int) int {
	n := uvarintSize(uint64(m.Queue)) + stringSize(len(m.Body))
	switch {
	case m.Timestamp != 0:
		n += varintSize(m.Timestamp)
	case version != batchVersion3:
		n += nowSize
	}
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
