package remoting

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"net/netip"
	"sort"
	"strings"
)

// Message flag bits (sysFlag) of RocketMQ's MessageSysFlag.
const (
	SysCompressed  int32 = 1 << 0
	SysBornHostV6  int32 = 1 << 4
	SysStoreHostV6 int32 = 1 << 5
	// SysTransactionMask holds a message's transaction type; the value
	// SysTransactionPrepared marks a half message (TRANSACTION_PREPARED_TYPE),
	// 2<<2 and 3<<2 the commit and rollback types.
	SysTransactionMask     int32 = 3 << 2
	SysTransactionPrepared int32 = 1 << 2
)

// Magic of the v1 stored-message layout (MESSAGE_MAGIC_CODE).
const messageMagicV1 int32 = -626843481

var magicV1Bits = func() uint32 { m := messageMagicV1; return uint32(m) }()

// Property separators: name\x01value\x02.
const (
	nameValueSep = '\x01'
	propertySep  = '\x02'
)

// MessageExt is one stored message as a pull response carries it.
type MessageExt struct {
	Topic            string
	QueueID          int32
	Flag             int32
	QueueOffset      int64
	PhysicalOffset   int64
	SysFlag          int32
	BornTimestamp    int64
	BornHost         netip.AddrPort
	StoreTimestamp   int64
	StoreHost        netip.AddrPort
	ReconsumeTimes   int32
	PreparedTxOffset int64
	Body             []byte
	Properties       map[string]string
}

// AppendMessageExt appends m in the v1 layout (RocketMQ's MessageDecoder
// with MAGIC_CODE; the Go client's primitive.DecodeMessage): the topic
// length is one byte and the properties' length two, so a longer topic or
// properties are refused. The host flags of SysFlag follow the addresses.
func AppendMessageExt(dst []byte, m *MessageExt) ([]byte, error) {
	if len(m.Topic) > 127 {
		return dst, fmt.Errorf("topic of %d bytes: the v1 message layout holds at most 127", len(m.Topic))
	}
	props := EncodeProperties(m.Properties)
	if len(props) > 0x7FFF {
		return dst, fmt.Errorf("properties of %d bytes: the v1 message layout holds at most %d", len(props), 0x7FFF)
	}
	sys := m.SysFlag &^ (SysBornHostV6 | SysStoreHostV6)
	born, bornV6 := hostBytes(m.BornHost)
	store, storeV6 := hostBytes(m.StoreHost)
	if bornV6 {
		sys |= SysBornHostV6
	}
	if storeV6 {
		sys |= SysStoreHostV6
	}
	size := 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + len(born) + 4 + 8 + len(store) + 4 + 4 + 8 + 4 + len(m.Body) + 1 + len(m.Topic) + 2 + len(props)
	b := dst
	b = binary.BigEndian.AppendUint32(b, uint32(size))
	b = binary.BigEndian.AppendUint32(b, magicV1Bits)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(m.Body))
	b = binary.BigEndian.AppendUint32(b, uint32(m.QueueID))
	b = binary.BigEndian.AppendUint32(b, uint32(m.Flag))
	b = binary.BigEndian.AppendUint64(b, uint64(m.QueueOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(m.PhysicalOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(sys))
	b = binary.BigEndian.AppendUint64(b, uint64(m.BornTimestamp))
	b = append(b, born...)
	b = binary.BigEndian.AppendUint32(b, uint32(m.BornHost.Port()))
	b = binary.BigEndian.AppendUint64(b, uint64(m.StoreTimestamp))
	b = append(b, store...)
	b = binary.BigEndian.AppendUint32(b, uint32(m.StoreHost.Port()))
	b = binary.BigEndian.AppendUint32(b, uint32(m.ReconsumeTimes))
	b = binary.BigEndian.AppendUint64(b, uint64(m.PreparedTxOffset))
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Body)))
	b = append(b, m.Body...)
	b = append(b, byte(len(m.Topic)))
	b = append(b, m.Topic...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
	return append(b, props...), nil
}

func hostBytes(ap netip.AddrPort) ([]byte, bool) {
	a := ap.Addr()
	if !a.IsValid() {
		return []byte{127, 0, 0, 1}, false
	}
	if a.Is4() || a.Is4In6() {
		v := a.Unmap().As4()
		return v[:], false
	}
	v := a.As16()
	return v[:], true
}

// DecodeMessageExts decodes a pull body: v1 messages back to back.
func DecodeMessageExts(data []byte) ([]MessageExt, error) {
	var out []MessageExt
	r := reader{b: data}
	for r.err == nil && len(r.b) > 0 {
		var m MessageExt
		size := int(int32(r.u32()))
		if r.err == nil && (size < 4 || size-4 > len(r.b)) {
			return out, fmt.Errorf("%w: message %d says %d bytes, %d left", ErrFrame, len(out), size, len(r.b)+4)
		}
		if magic := int32(r.u32()); r.err == nil && magic != messageMagicV1 {
			return out, fmt.Errorf("%w: message %d: magic %d, want %d (v1)", ErrFrame, len(out), magic, messageMagicV1)
		}
		r.u32() // body CRC
		m.QueueID = int32(r.u32())
		m.Flag = int32(r.u32())
		m.QueueOffset = int64(r.u64())
		m.PhysicalOffset = int64(r.u64())
		m.SysFlag = int32(r.u32())
		m.BornTimestamp = int64(r.u64())
		m.BornHost = readHost(&r, m.SysFlag&SysBornHostV6 != 0)
		m.StoreTimestamp = int64(r.u64())
		m.StoreHost = readHost(&r, m.SysFlag&SysStoreHostV6 != 0)
		m.ReconsumeTimes = int32(r.u32())
		m.PreparedTxOffset = int64(r.u64())
		m.Body = r.bytes(int(int32(r.u32())), "message body")
		m.Topic = string(r.bytes(int(r.u8()), "topic"))
		props := r.bytes(int(int16(r.u16())), "properties")
		if r.err != nil {
			return out, r.err
		}
		m.Properties = DecodeProperties(string(props))
		out = append(out, m)
	}
	return out, r.err
}

func readHost(r *reader, v6 bool) netip.AddrPort {
	n := 4
	if v6 {
		n = 16
	}
	ip := r.bytes(n, "host")
	port := r.u32()
	if r.err != nil {
		return netip.AddrPort{}
	}
	a, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(a, uint16(port))
}

// BatchMessage is one message of a batch send.
type BatchMessage struct {
	Flag       int32
	Body       []byte
	Properties map[string]string
}

// DecodeBatch decodes the body of SEND_BATCH_MESSAGE (the client's
// MessageBatch encoding: TOTALSIZE i32, MAGIC i32, BODYCRC i32, FLAG i32,
// BODYLEN i32 + body, PROPLEN i16 + properties, repeated). It refuses more
// than max messages. Bodies alias data.
func DecodeBatch(data []byte, max int) ([]BatchMessage, error) {
	var out []BatchMessage
	r := reader{b: data}
	for r.err == nil && len(r.b) > 0 {
		if len(out) >= max {
			return nil, fmt.Errorf("%w: a batch of more than %d messages", ErrFrame, max)
		}
		start := len(r.b)
		size := int(int32(r.u32()))
		r.u32() // magic: the Go client writes 0
		r.u32() // body CRC
		var m BatchMessage
		m.Flag = int32(r.u32())
		m.Body = r.bytes(int(int32(r.u32())), "batch message body")
		props := r.bytes(int(int16(r.u16())), "batch message properties")
		if r.err != nil {
			return nil, fmt.Errorf("batch message %d: %w", len(out), r.err)
		}
		if used := start - len(r.b); size != used {
			return nil, fmt.Errorf("%w: batch message %d says %d bytes, holds %d", ErrFrame, len(out), size, used)
		}
		m.Properties = DecodeProperties(string(props))
		out = append(out, m)
	}
	return out, r.err
}

// EncodeBatch is the body of a batch send (the client's encoding); tests
// and tools use it.
func EncodeBatch(msgs []BatchMessage) []byte {
	var b []byte
	for _, m := range msgs {
		props := EncodeProperties(m.Properties)
		size := 4 + 4 + 4 + 4 + 4 + len(m.Body) + 2 + len(props)
		b = binary.BigEndian.AppendUint32(b, uint32(size))
		b = binary.BigEndian.AppendUint32(b, 0)
		b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(m.Body))
		b = binary.BigEndian.AppendUint32(b, uint32(m.Flag))
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.Body)))
		b = append(b, m.Body...)
		b = binary.BigEndian.AppendUint16(b, uint16(len(props)))
		b = append(b, props...)
	}
	return b
}

// EncodeProperties writes name\x01value\x02 for each property, sorted by
// name.
func EncodeProperties(p map[string]string) string {
	if len(p) == 0 {
		return ""
	}
	var sb strings.Builder
	for _, k := range sortedKeys(p) {
		sb.WriteString(k)
		sb.WriteByte(nameValueSep)
		sb.WriteString(p[k])
		sb.WriteByte(propertySep)
	}
	return sb.String()
}

// DecodeProperties reads name\x01value\x02 pairs; an item without exactly
// one separator is skipped, as the clients do.
func DecodeProperties(s string) map[string]string {
	p := map[string]string{}
	for _, item := range strings.Split(s, string(propertySep)) {
		kv := strings.Split(item, string(nameValueSep))
		if len(kv) == 2 && kv[0] != "" {
			p[kv[0]] = kv[1]
		}
	}
	return p
}

// Uncompress inflates a zlib body (sysFlag bit 0), refusing output beyond
// max bytes.
func Uncompress(body []byte, max int) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("compressed body: %w", err)
	}
	defer zr.Close()
	out, err := io.ReadAll(io.LimitReader(zr, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("compressed body: %w", err)
	}
	if len(out) > max {
		return nil, fmt.Errorf("compressed body inflates to more than %d bytes", max)
	}
	return out, nil
}

// OffsetMessageID is RocketMQ's offsetMsgId: the store host's address and
// port and the physical offset, in upper-case hex.
func OffsetMessageID(store netip.AddrPort, physicalOffset int64) string {
	ip, _ := hostBytes(store)
	b := make([]byte, 0, len(ip)+12)
	b = append(b, ip...)
	b = binary.BigEndian.AppendUint32(b, uint32(store.Port()))
	b = binary.BigEndian.AppendUint64(b, uint64(physicalOffset))
	return strings.ToUpper(hex.EncodeToString(b))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
