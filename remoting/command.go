package remoting

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// MaxFrame is the largest frame read or written (RocketMQ's NettyDecoder
// frameMaxLength), counted without its own 4-byte length.
const MaxFrame = 16 << 20

// Version is the protocol version this side announces (RocketMQ V4_5_2, as
// the Go client sends).
const Version = 317

// ErrFrame wraps every reason a frame cannot be read or decoded.
var ErrFrame = errors.New("malformed remoting frame")

// ErrFrameLength is a frame length out of bounds: the stream cannot be
// delimited past it, so the connection has to close. Every other malformed
// frame (a header that does not decode) leaves the stream in step.
var ErrFrameLength = fmt.Errorf("%w: frame length out of bounds", ErrFrame)

// Command is one request or response.
type Command struct {
	// Code is the request or response code: a Java int in RocketMQ, so
	// 32 bits here (RocketMQ 5.x's pop requests are 200050 and up).
	Code     int32
	Language string // "JAVA", "GO", ...
	Version  int32
	Opaque   int32
	Flag     int32
	Remark   string
	Ext      map[string]string
	Body     []byte
	// Codec is the header codec the command arrived in; Encode writes it
	// in the same one, and a response is encoded as its request was.
	Codec byte
}

// IsResponse reports flag bit 0.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports flag bit 1.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// NewRequest is a request with the given ext fields (which may be nil).
func NewRequest(code int32, ext map[string]string, body []byte) *Command {
	if ext == nil {
		ext = map[string]string{}
	}
	return &Command{Code: code, Language: "GO", Version: Version, Ext: ext, Body: body}
}

// Response is the answer to req: its opaque echoed, flag bit 0 set.
func Response(req *Command, code int32, remark string) *Command {
	return &Command{Code: code, Language: "GO", Version: Version, Opaque: req.Opaque, Flag: FlagResponse,
		Remark: remark, Ext: map[string]string{}, Codec: req.Codec}
}

// ExtInt parses an ext field as an integer; a missing field is def.
func (c *Command) ExtInt(name string, def int64) (int64, error) {
	return ParseExtInt(name, c.Ext[name], def)
}

// ParseExtInt parses the value v of ext field name as an integer; an
// empty one is def.
func ParseExtInt(name, v string, def int64) (int64, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("field %s: %q is not an integer", name, v)
	}
	return n, nil
}

// ReadFrame reads one frame: its 4-byte length, then that many bytes. A
// length below 4 or above max is refused before anything is allocated.
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(l[:])))
	if n < 4 || n > int64(max) {
		return nil, fmt.Errorf("%w: %d, want 4..%d", ErrFrameLength, n, max)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: frame of %d bytes cut short: %w", ErrFrame, n, err)
	}
	return buf, nil
}

// Decode decodes a frame without its leading length (what ReadFrame
// returns). The body aliases frame.
func Decode(frame []byte) (*Command, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, no header length", ErrFrame, len(frame))
	}
	mark := binary.BigEndian.Uint32(frame)
	codec := byte(mark >> 24)
	hl := int(mark & 0xFFFFFF)
	if hl > len(frame)-4 {
		return nil, fmt.Errorf("%w: header length %d exceeds the %d bytes of the frame after it", ErrFrame, hl, len(frame)-4)
	}
	header := frame[4 : 4+hl]
	var c *Command
	var err error
	switch codec {
	case JSON:
		c, err = decodeJSONHeader(header)
	case RocketMQ:
		c, err = decodeBinaryHeader(header)
	default:
		return nil, fmt.Errorf("%w: unknown serialize type %d", ErrFrame, codec)
	}
	if err != nil {
		return nil, err
	}
	c.Codec = codec
	if body := frame[4+hl:]; len(body) > 0 {
		c.Body = body
	}
	return c, nil
}

// Recover reads what it can of a frame whose header does not decode: its
// codec, opaque and flag, so that the request can still be answered. ok is
// false when not even these can be found.
func Recover(frame []byte) (codec byte, opaque, flag int32, ok bool) {
	if len(frame) < 4 {
		return 0, 0, 0, false
	}
	mark := binary.BigEndian.Uint32(frame)
	codec = byte(mark >> 24)
	header := frame[4:]
	if hl := int(mark & 0xFFFFFF); hl < len(header) {
		header = header[:hl]
	}
	switch codec {
	case JSON:
		var h struct {
			Opaque json.RawMessage `json:"opaque"`
			Flag   json.RawMessage `json:"flag"`
		}
		if json.Unmarshal(header, &h) != nil || json.Unmarshal(h.Opaque, &opaque) != nil {
			return codec, 0, 0, false
		}
		json.Unmarshal(h.Flag, &flag)
		return codec, opaque, flag, true
	case RocketMQ:
		// code i16, language u8, version i16, then opaque and flag.
		if len(header) < 13 {
			return codec, 0, 0, false
		}
		return codec, int32(binary.BigEndian.Uint32(header[5:])), int32(binary.BigEndian.Uint32(header[9:])), true
	}
	return codec, 0, 0, false
}

// Encode is the whole frame of c, its length first, in c.Codec.
func (c *Command) Encode() ([]byte, error) {
	var header []byte
	var err error
	switch c.Codec {
	case JSON:
		header, err = encodeJSONHeader(c)
	case RocketMQ:
		header, err = encodeBinaryHeader(c)
	default:
		return nil, fmt.Errorf("unknown serialize type %d", c.Codec)
	}
	if err != nil {
		return nil, err
	}
	if len(header) > 0xFFFFFF {
		return nil, fmt.Errorf("header of %d bytes: at most %d", len(header), 0xFFFFFF)
	}
	n := 4 + len(header) + len(c.Body)
	if n > MaxFrame {
		return nil, fmt.Errorf("frame of %d bytes: at most %d", n, MaxFrame)
	}
	out := make([]byte, 8, 4+n)
	binary.BigEndian.PutUint32(out, uint32(n))
	binary.BigEndian.PutUint32(out[4:], uint32(c.Codec)<<24|uint32(len(header)))
	out = append(out, header...)
	return append(out, c.Body...), nil
}

type jsonHeader struct {
	Code      int32             `json:"code"`
	Language  string            `json:"language"`
	Version   int32             `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark,omitempty"`
	ExtFields map[string]string `json:"extFields"`
	// Java sends it; it names the codec of this RPC's header.
	SerializeTypeCurrentRPC string `json:"serializeTypeCurrentRPC"`
}

type jsonHeaderIn struct {
	Code      int32                      `json:"code"`
	Language  json.RawMessage            `json:"language"`
	Version   json.RawMessage            `json:"version"`
	Opaque    int32                      `json:"opaque"`
	Flag      int32                      `json:"flag"`
	Remark    json.RawMessage            `json:"remark"`
	ExtFields map[string]json.RawMessage `json:"extFields"`
}

// jsonHeaderFast is what well-behaved clients send: string ext values and
// a string language. scanJSONHeader decodes most headers into it, and
// encoding/json the rest it can; decoding into it before jsonHeaderIn
// spares the per-value work of jsonHeaderIn.
type jsonHeaderFast struct {
	Code      int32             `json:"code"`
	Language  string            `json:"language"`
	Version   int32             `json:"version"`
	Opaque    int32             `json:"opaque"`
	Flag      int32             `json:"flag"`
	Remark    string            `json:"remark"`
	ExtFields map[string]string `json:"extFields"`
}

func decodeJSONHeader(b []byte) (*Command, error) {
	f, ok := scanJSONHeader(b)
	if !ok {
		f = jsonHeaderFast{}
		ok = json.Unmarshal(b, &f) == nil
	}
	if ok {
		if f.ExtFields == nil {
			f.ExtFields = map[string]string{}
		}
		return &Command{Code: f.Code, Language: f.Language, Version: f.Version, Opaque: f.Opaque, Flag: f.Flag, Remark: f.Remark, Ext: f.ExtFields}, nil
	}
	var h jsonHeaderIn
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%w: JSON header: %w", ErrFrame, err)
	}
	// code, opaque and flag must be what they are; the rest is taken as
	// it comes: a version that is no int32 is 0 (only shown in logs), a
	// remark or language that is no string is its JSON text.
	c := &Command{Code: h.Code, Opaque: h.Opaque, Flag: h.Flag, Ext: make(map[string]string, len(h.ExtFields))}
	var v int32
	if json.Unmarshal(h.Version, &v) == nil {
		c.Version = v
	}
	c.Language = jsonText(h.Language)
	c.Remark = jsonText(h.Remark)
	for k, raw := range h.ExtFields {
		// Values should be strings (RocketMQ's HashMap<String,String>);
		// a number or boolean is taken as its text.
		var s string
		switch {
		case string(raw) == "null":
		case json.Unmarshal(raw, &s) == nil:
			c.Ext[k] = s
		default:
			c.Ext[k] = string(raw)
		}
	}
	return c, nil
}

// jsonText is a JSON string's value, or any other JSON value's text (null
// and absent: "").
func jsonText(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func encodeJSONHeader(c *Command) ([]byte, error) {
	ext := c.Ext
	if ext == nil {
		ext = map[string]string{}
	}
	lang := c.Language
	if lang == "" {
		lang = "GO"
	}
	return appendJSONHeader(make([]byte, 0, 256), &jsonHeader{Code: c.Code, Language: lang, Version: c.Version, Opaque: c.Opaque, Flag: c.Flag,
		Remark: c.Remark, ExtFields: ext, SerializeTypeCurrentRPC: "JSON"}), nil
}

var languages = map[byte]string{0: "JAVA", 1: "CPP", 2: "DOTNET", 3: "PYTHON", 4: "DELPHI", 5: "ERLANG", 6: "RUBY", 7: "OTHER", 8: "HTTP", 9: "GO", 10: "PHP", 11: "OMS", 12: "RUST"}

func languageCode(name string) byte {
	for k, v := range languages {
		if v == name {
			return k
		}
	}
	return 9
}

// The binary header: code i16, language u8, version i16, opaque i32,
// flag i32, remark (i32 length + bytes), ext (i32 length + entries of
// i16 key length, key, i32 value length, value). RocketMQ's
// RocketMQSerializable writes the code and version as Java shorts
// (writeShort / putShort((short) code)) and reads them back with
// readShort, sign-extended: a code above 32767 does not survive this
// codec in RocketMQ either (POP_MESSAGE, 200050, arrives as 3442).
func decodeBinaryHeader(b []byte) (*Command, error) {
	r := reader{b: b}
	c := &Command{}
	c.Code = int32(int16(r.u16()))
	lang := r.u8()
	c.Language = languages[lang]
	if c.Language == "" {
		c.Language = "OTHER"
	}
	c.Version = int32(int16(r.u16()))
	c.Opaque = int32(r.u32())
	c.Flag = int32(r.u32())
	c.Remark = string(r.bytes(int(int32(r.u32())), "remark"))
	ext := r.bytes(int(int32(r.u32())), "ext fields")
	if r.err != nil {
		return nil, r.err
	}
	c.Ext = map[string]string{}
	er := reader{b: ext}
	for er.err == nil && len(er.b) > 0 {
		k := er.bytes(int(int16(er.u16())), "ext key")
		v := er.bytes(int(int32(er.u32())), "ext value")
		if er.err == nil {
			c.Ext[string(k)] = string(v)
		}
	}
	if er.err != nil {
		return nil, er.err
	}
	if len(r.b) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the binary header's ext fields", ErrFrame, len(r.b))
	}
	return c, nil
}

func encodeBinaryHeader(c *Command) ([]byte, error) {
	var ext []byte
	for _, k := range sortedKeys(c.Ext) {
		v := c.Ext[k]
		if len(k) > 0x7FFF {
			return nil, fmt.Errorf("ext key of %d bytes", len(k))
		}
		ext = binary.BigEndian.AppendUint16(ext, uint16(len(k)))
		ext = append(ext, k...)
		ext = binary.BigEndian.AppendUint32(ext, uint32(len(v)))
		ext = append(ext, v...)
	}
	if c.Code != int32(int16(c.Code)) {
		// RocketMQ would send the low 16 bits, another request's code.
		return nil, fmt.Errorf("code %d does not fit the ROCKETMQ header's 16 bits; use the JSON header", c.Code)
	}
	b := make([]byte, 0, 21+len(c.Remark)+len(ext))
	b = binary.BigEndian.AppendUint16(b, uint16(c.Code))
	b = append(b, languageCode(c.Language))
	b = binary.BigEndian.AppendUint16(b, uint16(c.Version))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Opaque))
	b = binary.BigEndian.AppendUint32(b, uint32(c.Flag))
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.Remark)))
	b = append(b, c.Remark...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(ext)))
	return append(b, ext...), nil
}

// reader reads big-endian fields, remembering the first shortfall.
type reader struct {
	b   []byte
	err error
}

func (r *reader) need(n int, what string) bool {
	if r.err != nil {
		return false
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("%w: %s needs %d bytes, %d left", ErrFrame, what, n, len(r.b))
		return false
	}
	return true
}

func (r *reader) u8() byte {
	if !r.need(1, "field") {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 {
	if !r.need(2, "field") {
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32() uint32 {
	if !r.need(4, "field") {
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if !r.need(8, "field") {
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) bytes(n int, what string) []byte {
	if !r.need(n, what) {
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}
