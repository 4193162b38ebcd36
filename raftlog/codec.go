package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"strconv"
	"time"
)

// CommandType is the first byte of every Raft log entry written by raftmq.
type CommandType uint8

// Command types. Batches are owned by this package; the other types are
// defined and encoded by store/ and only named here so that the byte values
// live in one place.
const (
	CmdBatch CommandType = 1
	CmdMeta  CommandType = 2
)

// Batch formats. Both start with the command type, the version and a
// CRC32C of every byte after the first six (the header's remaining bytes
// included).
//
// Version 1: a 4-byte request count, then per request its producer id,
// sequence, topic and message count, and per message its queue,
// timestamp, key, tag, properties and body, each string and list with a
// uvarint length.
//
// Version 2 has no request count (requests run to the end of the entry),
// and a message starts with a flags byte that says whether a key, a tag
// and properties follow, instead of a zero length for each that is absent:
// 6 bytes fewer for a request of one plain message, 1 byte more for a
// message with all three (SmallestVersion).
//
// Version 3 is version 2 with one more message flag: the message's
// timestamp is the time its entry was appended (raft's AppendedAt, in
// milliseconds), and none follows. A producer that leaves the timestamp
// to the broker (Message.Timestamp 0) costs 6 bytes less per message; a
// reader passes the entry's time to ParseBatch. And a producer id of the
// form "#<n>" (n in decimal, without leading zeros: a number the group
// handed out) is stored as the uvarint 256+n where other ids have their
// length (at most 255): two or three bytes.
const (
	batchVersion1    = 1
	batchVersion2    = 2
	batchVersion3    = 3
	batchHeaderLen   = 1 + 1 + 4 + 4 // version 1: type, version, crc32c, request count
	batchV2HeaderLen = 1 + 1 + 4     // versions 2 and 3: type, version, crc32c
)

// BatchVersion is a batch entry's format: its second byte.
type BatchVersion uint8

// The batch versions this build writes. Every node reads version 1; a node
// stops applying at the first entry it cannot decode, so version 2 may be
// written only once every member of the group reads it (a rolling upgrade
// passes through groups where some do not): the caller decides that, with
// ReadByAll. The same holds for version 3.
const (
	BatchV1 BatchVersion = batchVersion1
	BatchV2 BatchVersion = batchVersion2
	BatchV3 BatchVersion = batchVersion3
)

// ReadVersion is the highest batch version this build reads; it reads every
// version from BatchV1 up to it.
const ReadVersion = BatchV3

// ReadByAll is the highest batch version this build writes that every
// member reads, given the highest version each reads (0: a member that has
// not said, which reads version 1 only).
func ReadByAll(reads []uint32) BatchVersion {
	v := uint32(ReadVersion)
	for _, r := range reads {
		v = min(v, r)
	}
	return BatchVersion(max(v, batchVersion1))
}

// Flags of a version 2 and 3 message.
const (
	msgHasKey    = 1 << 0
	msgHasTag    = 1 << 1
	msgHasProps  = 1 << 2
	msgEntryTime = 1 << 3 // version 3: the timestamp is the entry's, none follows
	msgFlagsV2   = msgHasKey | msgHasTag | msgHasProps
	msgFlagsV3   = msgFlagsV2 | msgEntryTime
)

// Limits enforced by the decoder, so that a corrupt or hostile entry can never
// make it allocate or loop without bound.
const (
	MaxNameLen       = 255
	MaxKeyLen        = 64 << 10
	MaxProperties    = 1024
	MaxRequestsBatch = 1 << 20
)

// ErrCorrupt is returned (wrapped) for any entry that fails to decode or
// check, and for a damaged store file.
var ErrCorrupt = errors.New("damaged data")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Message is one message as a producer hands it to the log. Queue is already
// chosen by the leader.
type Message struct {
	Queue uint32
	// Timestamp is in unix milliseconds; 0 stamps the message with the
	// time its entry is appended (version 3 stores no timestamp for it,
	// versions 1 and 2 the builder's clock).
	Timestamp  int64
	Key        string
	Tag        string
	Properties map[string]string
	Body       []byte
}

// Request is one produce request: the unit of producer dedupe. All its
// messages belong to one topic and are appended atomically.
type Request struct {
	ProducerID string
	Seq        uint64
	Topic      string
	Messages   []Message
}

// BatchBuilder encodes many requests into one Raft entry (group commit).
// The zero value is not usable; call NewBatchBuilder.
type BatchBuilder struct {
	buf     []byte
	count   uint32
	version byte
	now     int64 // versions 1 and 2: the stamp of messages without one
}

// NewBatchBuilder returns a builder of a batch in version v whose buffer
// starts with sizeHint bytes of capacity. It panics on a version this build
// does not write: such an entry would stop every node at it.
func NewBatchBuilder(sizeHint int, v BatchVersion) *BatchBuilder {
	var hdr int
	switch v {
	case BatchV1:
		hdr = batchHeaderLen
	case BatchV2, BatchV3:
		hdr = batchV2HeaderLen
	default:
		panic(fmt.Sprintf("raftlog: batch version %d is not one this build writes", v))
	}
	b := &BatchBuilder{buf: make([]byte, hdr, hdr+sizeHint), version: byte(v)}
	if v < BatchV3 {
		b.now = time.Now().UnixMilli()
	}
	b.buf[0] = byte(CmdBatch)
	b.buf[1] = byte(v)
	return b
}

// Add appends one request.
func (b *BatchBuilder) Add(r *Request) {
	if n, ok := producerNumber(r.ProducerID); ok && b.version == batchVersion3 {
		b.buf = binary.AppendUvarint(b.buf, numberedProducer+n)
	} else {
		b.buf = appendString(b.buf, r.ProducerID)
	}
	b.buf = binary.AppendUvarint(b.buf, r.Seq)
	b.buf = appendString(b.buf, r.Topic)
	b.buf = binary.AppendUvarint(b.buf, uint64(len(r.Messages)))
	for i := range r.Messages {
		m := &r.Messages[i]
		if b.version != batchVersion1 {
			b.buf = b.appendMessageV2(b.buf, m)
			continue
		}
		b.buf = binary.AppendUvarint(b.buf, uint64(m.Queue))
		b.buf = binary.AppendVarint(b.buf, b.stamp(m.Timestamp))
		b.buf = appendString(b.buf, m.Key)
		b.buf = appendString(b.buf, m.Tag)
		b.buf = binary.AppendUvarint(b.buf, uint64(len(m.Properties)))
		if len(m.Properties) > 0 {
			b.buf = appendProperties(b.buf, m.Properties)
		}
		b.buf = binary.AppendUvarint(b.buf, uint64(len(m.Body)))
		b.buf = append(b.buf, m.Body...)
	}
	b.count++
}

// stamp is the timestamp a version 1 or 2 message is written with.
func (b *BatchBuilder) stamp(ts int64) int64 {
	if ts == 0 {
		return b.now
	}
	return ts
}

// appendMessageV2 appends m in the version 2 or 3 format.
func (b *BatchBuilder) appendMessageV2(buf []byte, m *Message) []byte {
	var flags byte
	if m.Key != "" {
		flags |= msgHasKey
	}
	if m.Tag != "" {
		flags |= msgHasTag
	}
	if len(m.Properties) > 0 {
		flags |= msgHasProps
	}
	entryTime := b.version == batchVersion3 && m.Timestamp == 0
	if entryTime {
		flags |= msgEntryTime
	}
	buf = append(buf, flags)
	buf = binary.AppendUvarint(buf, uint64(m.Queue))
	if !entryTime {
		buf = binary.AppendVarint(buf, b.stamp(m.Timestamp))
	}
	if m.Key != "" {
		buf = appendString(buf, m.Key)
	}
	if m.Tag != "" {
		buf = appendString(buf, m.Tag)
	}
	if len(m.Properties) > 0 {
		buf = binary.AppendUvarint(buf, uint64(len(m.Properties)))
		buf = appendProperties(buf, m.Properties)
	}
	buf = binary.AppendUvarint(buf, uint64(len(m.Body)))
	return append(buf, m.Body...)
}

// appendProperties appends the key/value pairs of props (their count is
// the caller's).
func appendProperties(buf []byte, props map[string]string) []byte {
	if len(props) == 1 {
		for k, v := range props {
			buf = appendString(buf, k)
			buf = appendString(buf, v)
		}
		return buf
	}
	// Sorted, so one request always encodes to the same bytes.
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		buf = appendString(buf, k)
		buf = appendString(buf, props[k])
	}
	return buf
}

// Len is the encoded size so far.
func (b *BatchBuilder) Len() int { return len(b.buf) }

// Count is the number of requests added.
func (b *BatchBuilder) Count() int { return int(b.count) }

// Finish seals the batch and returns the entry bytes. The builder must not be
// used afterwards.
func (b *BatchBuilder) Finish() []byte {
	if b.version == batchVersion1 {
		binary.BigEndian.PutUint32(b.buf[6:10], b.count)
	}
	binary.BigEndian.PutUint32(b.buf[2:6], crc32.Checksum(b.buf[6:], castagnoli))
	return b.buf
}

// EncodeBatch is a convenience for a batch of the given requests, in
// version 1.
func EncodeBatch(reqs ...*Request) []byte {
	b := NewBatchBuilder(0, BatchV1)
	for _, r := range reqs {
		b.Add(r)
	}
	return b.Finish()
}

// numberedProducer is what a version 3 batch adds to a producer's number
// in place of the length of its id: a length is at most MaxNameLen.
const numberedProducer = MaxNameLen + 1

// producerNumber is n for a producer id "#<n>" written as version 3
// stores it (decimal, no leading zero, no sign), and ok false for any
// other id: those are stored as they are.
func producerNumber(id string) (n uint64, ok bool) {
	if len(id) < 2 || len(id) > 21 || id[0] != '#' || (id[1] == '0' && len(id) > 2) {
		return 0, false
	}
	for i := 1; i < len(id); i++ {
		if id[i] < '0' || id[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(id[1:], 10, 64)
	return n, err == nil && n <= math.MaxUint64-numberedProducer
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// Batch is a verified, lazily decoded view of a batch entry. It references
// the entry bytes and copies nothing until asked.
type Batch struct {
	data    []byte
	count   int // requests, as a version 1 header says (0 for versions 2 and 3)
	body    int // offset of the first request
	version byte
	at      int64 // the entry's time: the timestamp of version 3 messages stamped with it
}

// ParseBatch checks the header and CRC of a batch entry. at is the entry's
// time (EntryTime): the timestamp of the messages stamped with it. A
// caller that reads no timestamps may pass 0.
func ParseBatch(data []byte, at int64) (Batch, error) {
	b, err := ParseReadBatch(data, at)
	if err != nil {
		return Batch{}, err
	}
	want := binary.BigEndian.Uint32(data[2:6])
	if got := crc32.Checksum(data[6:], castagnoli); got != want {
		return Batch{}, fmt.Errorf("%w: crc32c %08x, header says %08x", ErrCorrupt, got, want)
	}
	return b, nil
}

// ParseReadBatch checks the header of a batch entry returned by
// Stores.Read, which verified its CRC when it loaded the entry from the log
// store: a queue's reader re-reads a cached entry for every queue, and
// checking 23 KiB of CRC each time cost a tenth of the leader's CPU while
// consumers read. Decoding stays bounds-checked, so a damaged entry gives
// ErrCorrupt, never a crash.
func ParseReadBatch(data []byte, at int64) (Batch, error) {
	if len(data) < batchV2HeaderLen || (len(data) < batchHeaderLen && data[1] == batchVersion1) {
		return Batch{}, fmt.Errorf("%w: %d bytes is shorter than the header", ErrCorrupt, len(data))
	}
	if CommandType(data[0]) != CmdBatch {
		return Batch{}, fmt.Errorf("%w: command type %d is not a batch", ErrCorrupt, data[0])
	}
	switch data[1] {
	case batchVersion1:
	case batchVersion2, batchVersion3:
		return Batch{data: data, body: batchV2HeaderLen, version: data[1], at: at}, nil
	default:
		return Batch{}, fmt.Errorf("%w: unknown batch version %d", ErrCorrupt, data[1])
	}
	n := binary.BigEndian.Uint32(data[6:10])
	if n > MaxRequestsBatch {
		return Batch{}, fmt.Errorf("%w: %d requests", ErrCorrupt, n)
	}
	return Batch{data: data, count: int(n), body: batchHeaderLen, version: batchVersion1, at: at}, nil
}

// Requests is the number of requests the batch's header declares: 0 for
// a version 2 or 3 batch, whose header does not count them (Each walks
// them all). It sizes buffers; it is not a bound.
func (b Batch) Requests() int { return b.count }

// RequestHeader is what a request says before its messages. Strings are
// copies.
type RequestHeader struct {
	ProducerID string
	Seq        uint64
	Topic      string
	Count      int // messages
}

// RequestView is one request inside a batch; message bodies returned by
// Messages alias the entry.
type RequestView struct {
	RequestHeader
	msgs    []byte
	version byte
	at      int64
}

// MessageView is one message inside a batch. Body aliases the entry bytes;
// callers that keep it beyond the entry's life must copy it.
type MessageView struct {
	Queue     uint32
	Timestamp int64
	Key       []byte
	Tag       []byte
	props     []byte
	nprops    int
	Body      []byte
}

// Properties decodes the message properties (nil when there are none).
func (m *MessageView) Properties() map[string]string {
	if m.nprops == 0 {
		return nil
	}
	out := make(map[string]string, m.nprops)
	d := decoder{buf: m.props}
	for i := 0; i < m.nprops; i++ {
		k := d.bytes(MaxKeyLen)
		v := d.bytes(math.MaxInt32)
		out[string(k)] = string(v)
	}
	return out
}

// Each walks the requests in order. fn gets the request number (0-based) and
// a view; returning false stops the walk. The returned error reports
// corruption found on the way.
func (b Batch) Each(fn func(i int, r *RequestView) bool) error {
	d := b.decoder()
	r := RequestView{version: b.version, at: b.at}
	var m MessageView
	for i := 0; b.more(i, &d); i++ {
		if !d.header(i, &r.RequestHeader) {
			return d.wrap(i)
		}
		start := d.off
		// Skip over the messages so that the next request can be found; the
		// walk doubles as validation of every length on the way.
		for j := 0; j < r.Count; j++ {
			if !d.message(&m) {
				return d.wrap(i)
			}
		}
		r.msgs = d.buf[start:d.off]
		if !fn(i, &r) {
			return nil
		}
	}
	return b.end(&d)
}

// Walk visits the requests in order and, in the same pass, the messages of
// each request that visit returns true for: each message is decoded once,
// where Each and RequestView.Messages decode it twice. msg gets the
// message's number in its request; returning false stops the walk. The
// header and the view are reused between calls.
func (b Batch) Walk(visit func(i int, h *RequestHeader) bool, msg func(j int, m *MessageView) bool) error {
	d := b.decoder()
	var h RequestHeader
	var m MessageView
	for i := 0; b.more(i, &d); i++ {
		if !d.header(i, &h) {
			return d.wrap(i)
		}
		want := visit(i, &h)
		for j := 0; j < h.Count; j++ {
			if !d.message(&m) {
				return d.wrap(i)
			}
			if want && !msg(j, &m) {
				return nil
			}
		}
	}
	return b.end(&d)
}

// decoder is a decoder of the batch's requests.
func (b *Batch) decoder() decoder {
	return decoder{buf: b.data[b.body:], base: b.body, version: b.version, at: b.at}
}

// more reports whether request i follows: a version 1 batch counts its
// requests, a version 2 or 3 one runs to the end of the entry.
func (b Batch) more(i int, d *decoder) bool {
	return i < b.count || (b.version != batchVersion1 && d.off < len(d.buf))
}

// end checks that a walk that read every request ended with the entry.
func (b Batch) end(d *decoder) error {
	if d.off != len(d.buf) {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.buf)-d.off)
	}
	return nil
}

// header reads the header of request i.
func (d *decoder) header(i int, h *RequestHeader) bool {
	if i >= MaxRequestsBatch {
		d.err = fmt.Errorf("more than %d requests", MaxRequestsBatch)
		return false
	}
	h.ProducerID = d.producer()
	h.Seq = d.uvarint()
	h.Topic = string(d.bytes(MaxNameLen))
	n := d.uvarint()
	if d.err == nil && n > math.MaxInt32 {
		d.err = fmt.Errorf("%d messages", n)
	}
	h.Count = int(n)
	return d.err == nil
}

// Messages walks the messages of a request. The view passed to fn is reused
// between calls. Returning false stops the walk.
func (r *RequestView) Messages(fn func(j int, m *MessageView) bool) {
	d := r.decoder()
	var m MessageView
	for j := 0; j < r.Count; j++ {
		if !d.message(&m) || !fn(j, &m) {
			return
		}
	}
}

// decoder is a decoder of the request's messages.
func (r *RequestView) decoder() decoder {
	return decoder{buf: r.msgs, version: r.version, at: r.at}
}

// DecodeBatch fully decodes a batch into requests, copying everything. It is
// meant for tests and tools; the broker uses the lazy views. at is the
// entry's time, as ParseBatch takes it.
func DecodeBatch(data []byte, at int64) ([]Request, error) {
	b, err := ParseBatch(data, at)
	if err != nil {
		return nil, err
	}
	var out []Request
	err = b.Each(func(_ int, rv *RequestView) bool {
		r := Request{ProducerID: rv.ProducerID, Seq: rv.Seq, Topic: rv.Topic}
		rv.Messages(func(_ int, m *MessageView) bool {
			r.Messages = append(r.Messages, Message{
				Queue:      m.Queue,
				Timestamp:  m.Timestamp,
				Key:        string(m.Key),
				Tag:        string(m.Tag),
				Properties: m.Properties(),
				Body:       append([]byte{}, m.Body...),
			})
			return true
		})
		out = append(out, r)
		return true
	})
	return out, err
}

type decoder struct {
	buf     []byte
	off     int
	err     error
	base    int  // offset of buf in the entry, for errors
	version byte // of the batch
	at      int64
}

func (d *decoder) wrap(req int) error {
	return fmt.Errorf("%w: request %d at byte %d: %v", ErrCorrupt, req, d.off+d.base, d.err)
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf[d.off:])
	if n <= 0 {
		d.err = errors.New("bad uvarint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf[d.off:])
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.off += n
	return v
}

// producer reads a request's producer id: its length and bytes, or in
// version 3 a producer's number.
func (d *decoder) producer() string {
	if d.version != batchVersion3 {
		return string(d.bytes(MaxNameLen))
	}
	start := d.off
	if x := d.uvarint(); d.err == nil && x >= numberedProducer {
		return "#" + strconv.FormatUint(x-numberedProducer, 10)
	}
	d.off = start
	return string(d.bytes(MaxNameLen))
}

func (d *decoder) bytes(max int) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(d.buf)-d.off) {
		d.err = fmt.Errorf("length %d out of bounds", n)
		return nil
	}
	b := d.buf[d.off : d.off+int(n) : d.off+int(n)]
	d.off += int(n)
	return b
}

func (d *decoder) message(m *MessageView) bool {
	if d.version != batchVersion1 {
		return d.messageV2(m)
	}
	if !d.queueAndTime(m, false) {
		return false
	}
	m.Key = d.bytes(MaxKeyLen)
	m.Tag = d.bytes(MaxNameLen)
	np := d.uvarint()
	if np > MaxProperties {
		d.err = fmt.Errorf("%d properties", np)
		return false
	}
	m.props, m.nprops = d.props(np)
	m.Body = d.bytes(math.MaxInt32)
	return d.err == nil
}

// queueAndTime reads the queue and timestamp that begin a message of
// any version; entryTime: the message has none, it is the entry's.
func (d *decoder) queueAndTime(m *MessageView, entryTime bool) bool {
	q := d.uvarint()
	if q > math.MaxUint32 {
		d.err = fmt.Errorf("queue %d out of range", q)
		return false
	}
	m.Queue = uint32(q)
	if entryTime {
		m.Timestamp = d.at
	} else {
		m.Timestamp = d.varint()
	}
	return d.err == nil
}

// props reads np encoded properties and returns their bytes.
func (d *decoder) props(np uint64) ([]byte, int) {
	start := d.off
	for i := uint64(0); i < np && d.err == nil; i++ {
		d.bytes(MaxKeyLen)
		d.bytes(math.MaxInt32)
	}
	return d.buf[start:d.off], int(np)
}

// messageV2 reads a version 2 or 3 message. A flag for an empty key, tag
// or property list is refused, so that every message has one encoding.
func (d *decoder) messageV2(m *MessageView) bool {
	if d.err != nil {
		return false
	}
	if d.off >= len(d.buf) {
		d.err = errors.New("message flags missing")
		return false
	}
	flags := d.buf[d.off]
	d.off++
	allowed := byte(msgFlagsV2)
	if d.version == batchVersion3 {
		allowed = msgFlagsV3
	}
	if flags&^allowed != 0 {
		d.err = fmt.Errorf("message flags %#x", flags)
		return false
	}
	if !d.queueAndTime(m, flags&msgEntryTime != 0) {
		return false
	}
	m.Key, m.Tag, m.props, m.nprops = nil, nil, nil, 0
	if flags&msgHasKey != 0 {
		if m.Key = d.bytes(MaxKeyLen); d.err == nil && len(m.Key) == 0 {
			d.err = errors.New("empty key flagged")
		}
	}
	if flags&msgHasTag != 0 {
		if m.Tag = d.bytes(MaxNameLen); d.err == nil && len(m.Tag) == 0 {
			d.err = errors.New("empty tag flagged")
		}
	}
	if flags&msgHasProps != 0 {
		np := d.uvarint()
		if d.err == nil && (np == 0 || np > MaxProperties) {
			d.err = fmt.Errorf("%d properties", np)
			return false
		}
		m.props, m.nprops = d.props(np)
	}
	m.Body = d.bytes(math.MaxInt32)
	return d.err == nil
}

func crc32Of(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
