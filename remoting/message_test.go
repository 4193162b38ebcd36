package remoting

import (
	"bytes"
	"compress/zlib"
	"net/netip"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// The pull body is read by the real client's own decoder.
func TestPullBodyDecodedByGoClient(t *testing.T) {
	store := netip.MustParseAddrPort("127.0.0.1:10911")
	msgs := []MessageExt{
		{Topic: "orders", QueueID: 3, QueueOffset: 7, PhysicalOffset: 12345<<24 | 2, BornTimestamp: 1000, StoreTimestamp: 1001,
			StoreHost: store, ReconsumeTimes: 2, Body: []byte("hello"),
			Properties: map[string]string{"TAGS": "tagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC"}},
		{Topic: "orders", QueueID: 3, QueueOffset: 8, PhysicalOffset: 12346 << 24, StoreHost: netip.MustParseAddrPort("[::1]:10911"), Body: []byte{}},
	}
	var body []byte
	for i := range msgs {
		var err error
		if body, err = AppendMessageExt(body, &msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	got := primitive.DecodeMessage(body)
	if len(got) != 2 {
		t.Fatalf("go client decoded %d messages", len(got))
	}
	m := got[0]
	if m.Topic != "orders" || m.Queue.QueueId != 3 || m.QueueOffset != 7 || m.CommitLogOffset != 12345<<24|2 || string(m.Body) != "hello" ||
		m.GetTags() != "tagA" || m.GetKeys() != "k1 k2" || m.MsgId != "ABC" || m.ReconsumeTimes != 2 || m.StoreTimestamp != 1001 || m.BornTimestamp != 1000 {
		t.Fatalf("go client read %s", m)
	}
	if m.StoreHost != "127.0.0.1:10911" {
		t.Fatalf("store host %q", m.StoreHost)
	}
	if want := OffsetMessageID(store, 12345<<24|2); m.OffsetMsgId != want {
		t.Fatalf("offset msg id %s, ours %s", m.OffsetMsgId, want)
	}
	if got[1].QueueOffset != 8 || len(got[1].Body) != 0 || got[1].MsgId != got[1].OffsetMsgId {
		t.Fatalf("second message %s", got[1])
	}
	back, err := DecodeMessageExts(body)
	if err != nil || len(back) != 2 || back[0].Properties["KEYS"] != "k1 k2" || back[1].StoreHost != msgs[1].StoreHost {
		t.Fatalf("own decoder: %v %+v", err, back)
	}
}

func TestMessageLimits(t *testing.T) {
	if _, err := AppendMessageExt(nil, &MessageExt{Topic: strings.Repeat("t", 128)}); err == nil {
		t.Fatal("128-byte topic encoded")
	}
	if _, err := AppendMessageExt(nil, &MessageExt{Topic: "t", Properties: map[string]string{"k": strings.Repeat("v", 40000)}}); err == nil {
		t.Fatal("40000-byte properties encoded")
	}
}

// The batch body the real client's producer encodes.
func TestBatchFromGoClient(t *testing.T) {
	a := primitive.NewMessage("t", []byte("one"))
	a.WithTag("x")
	a.WithKeys([]string{"k"})
	b := primitive.NewMessage("t", []byte("two"))
	b.Flag = 5
	body := producer.MarshalMessageBatch(a, b)
	got, err := DecodeBatch(body, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0].Body) != "one" || got[0].Properties["TAGS"] != "x" || got[0].Properties["KEYS"] != "k" || string(got[1].Body) != "two" || got[1].Flag != 5 {
		t.Fatalf("decoded %+v", got)
	}
	if _, err := DecodeBatch(body, 1); err == nil {
		t.Fatal("batch above the bound decoded")
	}
	if _, err := DecodeBatch(body[:len(body)-1], 10); err == nil {
		t.Fatal("cut batch decoded")
	}
	if !bytes.Equal(EncodeBatch(got)[:4], body[:4]) {
		t.Fatal("EncodeBatch sizes differ")
	}
}

func TestProperties(t *testing.T) {
	p := map[string]string{"b": "2", "a": "1"}
	if s := EncodeProperties(p); s != "a\x011\x02b\x012\x02" {
		t.Fatalf("%q", s)
	}
	got := DecodeProperties("a\x011\x02junk\x02b\x012")
	if len(got) != 2 || got["a"] != "1" || got["b"] != "2" {
		t.Fatalf("%v", got)
	}
}

func TestUncompress(t *testing.T) {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(bytes.Repeat([]byte("a"), 10000))
	w.Close()
	out, err := Uncompress(buf.Bytes(), 10000)
	if err != nil || len(out) != 10000 {
		t.Fatalf("%d bytes, %v", len(out), err)
	}
	if _, err := Uncompress(buf.Bytes(), 9999); err == nil {
		t.Fatal("inflated past the bound")
	}
	if _, err := Uncompress([]byte("not zlib"), 100); err == nil {
		t.Fatal("garbage inflated")
	}
}

func FuzzDecodeMessageExts(f *testing.F) {
	b, _ := AppendMessageExt(nil, &MessageExt{Topic: "t", Body: []byte("x"), Properties: map[string]string{"a": "b"}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := DecodeMessageExts(data)
		if err != nil {
			return
		}
		var out []byte
		for i := range msgs {
			if out, err = AppendMessageExt(out, &msgs[i]); err != nil {
				return
			}
		}
		again, err := DecodeMessageExts(out)
		if err != nil || len(again) != len(msgs) {
			t.Fatalf("re-decode: %d of %d, %v", len(again), len(msgs), err)
		}
	})
}

func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch([]BatchMessage{{Body: []byte("x"), Properties: map[string]string{"a": "b"}}, {Flag: 1}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		msgs, err := DecodeBatch(data, 64)
		if err != nil {
			return
		}
		again, err := DecodeBatch(EncodeBatch(msgs), 64)
		if err != nil || len(again) != len(msgs) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}
