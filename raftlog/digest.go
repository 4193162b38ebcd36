package raftlog

import (
	"encoding/binary"
	"hash/crc64"
)

// crc64Table is shared by every digest; crc64.Update with a table allocates
// nothing.
var crc64Table = crc64.MakeTable(crc64.ECMA)

// Digest is a 64-bit fingerprint of a request's content: its topic, its
// message count and, for every message in order, the encoded queue, key,
// tag, properties and body. Producer id and sequence are not part of it
// (they are what the digest is looked up by), and neither is the timestamp:
// a broker stamps a message that has none when it receives it, so a retry
// of one request may carry other timestamps.
//
// It is computed from the entry bytes, so every node gets the same value for
// the same entry (properties are encoded sorted by BatchBuilder; the digest
// covers them as encoded). It is a CRC-64 (ECMA), not a cryptographic hash:
// it tells a retry from a different request, it does not resist a producer
// that crafts a collision against its own sequence.
//
// A request whose messages do not decode gives the digest of the bytes up to
// the damage; Batch.Each has already refused such an entry.
func (r *RequestView) Digest() uint64 {
	var h uint64
	var n [binary.MaxVarintLen64]byte
	h = crc64.Update(h, crc64Table, binary.AppendUvarint(n[:0], uint64(len(r.Topic))))
	h = crc64.Update(h, crc64Table, []byte(r.Topic))
	h = crc64.Update(h, crc64Table, binary.AppendUvarint(n[:0], uint64(r.Count)))
	d := decoder{buf: r.msgs}
	var m MessageView
	for j := 0; j < r.Count; j++ {
		start := d.off
		d.uvarint() // queue
		stamp := d.off
		d.varint() // timestamp: left out
		rest := d.off
		d.off = start
		if !d.message(&m) {
			break
		}
		h = crc64.Update(h, crc64Table, d.buf[start:stamp])
		h = crc64.Update(h, crc64Table, d.buf[rest:d.off])
	}
	return h
}
