package remoting

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func TestJSONRoundTrip(t *testing.T) {
	c := NewRequest(PullMessage, map[string]string{"topic": "t", "queueId": "3"}, []byte("body"))
	c.Opaque = 42
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if n := int(binary.BigEndian.Uint32(b)); n != len(b)-4 {
		t.Fatalf("frame length %d, frame has %d bytes after it", n, len(b)-4)
	}
	if b[4] != JSON {
		t.Fatalf("serialize type %d", b[4])
	}
	got, err := Decode(b[4:])
	if err != nil {
		t.Fatal(err)
	}
	if got.Code != PullMessage || got.Opaque != 42 || got.Ext["topic"] != "t" || got.Ext["queueId"] != "3" || string(got.Body) != "body" || got.Language != "GO" {
		t.Fatalf("decoded %+v", got)
	}
	// Trap 1: every extFields value is a JSON string.
	hl := int(binary.BigEndian.Uint32(b[4:]) & 0xFFFFFF)
	if h := string(b[8 : 8+hl]); !strings.Contains(h, `"queueId":"3"`) {
		t.Fatalf("header %s: queueId not a string", h)
	}
}

func TestJSONHeaderLenient(t *testing.T) {
	// Java's header: language as an enum name, numbers where a sloppy
	// encoder put them, null ext values.
	h := `{"code":105,"language":"JAVA","version":401,"opaque":7,"flag":0,"remark":null,"extFields":{"topic":"a","n":5,"b":true,"z":null},"serializeTypeCurrentRPC":"JSON"}`
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(h)))
	frame = append(frame, h...)
	c, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	if c.Code != 105 || c.Language != "JAVA" || c.Ext["topic"] != "a" || c.Ext["n"] != "5" || c.Ext["b"] != "true" || c.Body != nil {
		t.Fatalf("decoded %+v", c)
	}
	if _, ok := c.Ext["z"]; ok {
		t.Fatal("a null ext value became a field")
	}
}

// The binary header as RocketMQSerializable writes it, built by hand.
func TestBinaryHeaderLayout(t *testing.T) {
	var h []byte
	h = binary.BigEndian.AppendUint16(h, 11)
	h = append(h, 0) // JAVA
	h = binary.BigEndian.AppendUint16(h, 401)
	h = binary.BigEndian.AppendUint32(h, 9)
	h = binary.BigEndian.AppendUint32(h, 2)
	h = binary.BigEndian.AppendUint32(h, 2)
	h = append(h, "hi"...)
	var ext []byte
	ext = binary.BigEndian.AppendUint16(ext, 5)
	ext = append(ext, "topic"...)
	ext = binary.BigEndian.AppendUint32(ext, 3)
	ext = append(ext, "abc"...)
	h = binary.BigEndian.AppendUint32(h, uint32(len(ext)))
	h = append(h, ext...)
	frame := binary.BigEndian.AppendUint32(nil, uint32(RocketMQ)<<24|uint32(len(h)))
	frame = append(frame, h...)
	frame = append(frame, "xyz"...)
	c, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	if c.Code != 11 || c.Language != "JAVA" || c.Version != 401 || c.Opaque != 9 || !c.IsOneway() || c.Remark != "hi" || c.Ext["topic"] != "abc" || string(c.Body) != "xyz" || c.Codec != RocketMQ {
		t.Fatalf("decoded %+v", c)
	}
	// Encoding it again gives the same header bytes (one ext field, so
	// no ordering question).
	c.Body = []byte("xyz")
	b, err := c.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b[4:], frame) {
		t.Fatalf("re-encoded\n%x\nwant\n%x", b[4:], frame)
	}
}

func TestMalformedFrames(t *testing.T) {
	big := binary.BigEndian.AppendUint32(nil, MaxFrame+1)
	if _, err := ReadFrame(bytes.NewReader(big), MaxFrame); !errors.Is(err, ErrFrame) {
		t.Fatalf("oversized length: %v", err)
	}
	neg := binary.BigEndian.AppendUint32(nil, 0xFFFFFFF0)
	if _, err := ReadFrame(bytes.NewReader(neg), MaxFrame); !errors.Is(err, ErrFrame) {
		t.Fatalf("negative length: %v", err)
	}
	short := append(binary.BigEndian.AppendUint32(nil, 100), 1, 2, 3)
	if _, err := ReadFrame(bytes.NewReader(short), MaxFrame); !errors.Is(err, ErrFrame) {
		t.Fatalf("short frame: %v", err)
	}
	cases := map[string][]byte{
		"header longer than frame": binary.BigEndian.AppendUint32(nil, 50),
		"unknown codec":            binary.BigEndian.AppendUint32(nil, 7<<24),
		"bad json":                 append(binary.BigEndian.AppendUint32(nil, 3), "{x}"...),
		"binary header cut":        append(binary.BigEndian.AppendUint32(nil, 1<<24|3), 0, 1, 2),
		"binary remark too long": func() []byte {
			h := make([]byte, 17)
			h = binary.BigEndian.AppendUint32(h[:13], 1<<30)
			return append(binary.BigEndian.AppendUint32(nil, 1<<24|uint32(len(h))), h...)
		}(),
	}
	for name, f := range cases {
		if _, err := Decode(f); !errors.Is(err, ErrFrame) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, codec := range []byte{JSON, RocketMQ} {
		c := NewRequest(SendMessage, map[string]string{"topic": "t", "properties": "a\x01b\x02"}, []byte("x"))
		c.Codec = codec
		b, _ := c.Encode()
		f.Add(b[4:])
	}
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	// Codes past 16 bits (RocketMQ 5.x's pop family), absurd fields.
	for _, h := range []string{
		`{"code":200050,"language":"JAVA","version":475,"opaque":5,"flag":0,"extFields":{"consumerGroup":"g"}}`,
		`{"code":2147483647,"version":2147483647,"opaque":-2147483648,"flag":-1}`,
		`{"code":4294967296,"opaque":1}`,
		`{"code":-1,"language":null,"version":"x","opaque":3,"flag":2,"remark":[1],"extFields":{"a":{"b":1}}}`,
		`{"code":1e3,"opaque":"7"}`,
	} {
		f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(len(h))), h...))
	}
	for _, code := range []uint16{0xFFFF, 0x8000, 0x0D72} {
		h := binary.BigEndian.AppendUint16(nil, code)
		h = append(h, 0xFF)
		h = binary.BigEndian.AppendUint16(h, 0xFFFF)
		h = binary.BigEndian.AppendUint32(h, 0x7FFFFFFF)
		h = binary.BigEndian.AppendUint32(h, 0xFFFFFFFF)
		h = binary.BigEndian.AppendUint32(h, 0xFFFFFFFF) // remark length -1
		h = binary.BigEndian.AppendUint32(h, 0)
		f.Add(append(binary.BigEndian.AppendUint32(nil, uint32(RocketMQ)<<24|uint32(len(h))), h...))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := Decode(frame)
		_, opaque, _, ok := Recover(frame) // never panics
		if err != nil {
			return
		}
		if ok && opaque != c.Opaque {
			t.Fatalf("recovered opaque %d, decoded %d", opaque, c.Opaque)
		}
		// What decodes must encode and decode to the same fields.
		b, err := c.Encode()
		if err != nil {
			return
		}
		c2, err := Decode(b[4:])
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if c2.Code != c.Code || c2.Opaque != c.Opaque || len(c2.Ext) != len(c.Ext) || !bytes.Equal(c2.Body, c.Body) {
			t.Fatalf("round trip changed %+v to %+v", c, c2)
		}
	})
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		frame, err := ReadFrame(bytes.NewReader(data), 1<<10)
		if err == nil && len(frame) > 1<<10 {
			t.Fatalf("read a frame of %d bytes past the bound", len(frame))
		}
	})
}
