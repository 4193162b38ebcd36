package remoting

import (
	"encoding/json"
	"maps"
	"testing"
)

// goClientHeader is a send header as rocketmq-client-go writes it
// (jsoniter): properties joined with \u0001 and \u0002.
const goClientHeader = `{"code":310,"language":"GO","version":317,"opaque":12,"flag":0,"remark":"","extFields":{"a":"bench","b":"rmqbench","c":"TBW102","d":"4","e":"2","f":"0","g":"1765139000000","h":"0","i":"UNIQ_KEY\u0001C0A8000100002A9F0000000001\u0002WAIT\u0001true\u0002","j":"0","k":"false","m":"false"}}`

func TestScanJSONHeader(t *testing.T) {
	h, ok := scanJSONHeader([]byte(goClientHeader))
	if !ok {
		t.Fatal("the Go client's send header was not taken")
	}
	if h.Code != 310 || h.Language != "GO" || h.Version != 317 || h.Opaque != 12 || h.ExtFields["b"] != "rmqbench" ||
		h.ExtFields["i"] != "UNIQ_KEY\x01C0A8000100002A9F0000000001\x02WAIT\x01true\x02" {
		t.Fatalf("decoded %+v", h)
	}
	java := ` { "code" : 11, "extFields" : {"topic":"t\"q\\\/\b\f\n\r\t\u00e9\u4e2d"}, "flag":2, "language":"JAVA", "opaque":-7, "serializeTypeCurrentRPC":"JSON", "version":475 } `
	h, ok = scanJSONHeader([]byte(java))
	if !ok || h.Code != 11 || h.Opaque != -7 || h.Flag != 2 || h.ExtFields["topic"] != "t\"q\\/\b\f\n\r\té中" {
		t.Fatalf("Java-style header: ok %v, %+v", ok, h)
	}
	// Left to encoding/json: it decides these, the scanner must not.
	for _, in := range []string{
		`{"code":1,"Opaque":2}`,             // a field's name in another case
		`{"code":1,"code":2}`,               // a duplicate field
		`{"code":1,"extFields":{"a":null}}`, // null
		`{"code":1.0}`, `{"code":1e3}`, `{"code":01}`, `{"code":2147483648}`,
		`{"code":1,"extFields":{"a":1}}`,               // a number for a string
		`{"code":1,"other":[1]}`,                       // an unknown field that is no string
		`{"remark":"\ud800"}`, "{\"remark\":\"\xff\"}", // replaced with U+FFFD by encoding/json
		`{"code":1}x`, `{"code":1,}`, `[1]`, ``, `{"remark":"a` + "\n" + `"}`,
	} {
		if _, ok := scanJSONHeader([]byte(in)); ok {
			t.Errorf("%s: taken by the scanner", in)
		}
	}
}

// FuzzScanJSONHeader holds the scanner to encoding/json: whatever it
// takes, encoding/json decodes to the same fields.
func FuzzScanJSONHeader(f *testing.F) {
	f.Add([]byte(goClientHeader))
	f.Add([]byte(`{"code":1,"language":"JAVA","serializeTypeCurrentRPC":"JSON","extFields":{}}`))
	f.Add([]byte(`{"remark":"\u0041\uD83D\uDE00\/"}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := scanJSONHeader(b)
		if !ok {
			return
		}
		var want jsonHeaderFast
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("scanner took %q, encoding/json refuses it: %v", b, err)
		}
		if got.Code != want.Code || got.Language != want.Language || got.Version != want.Version || got.Opaque != want.Opaque ||
			got.Flag != want.Flag || got.Remark != want.Remark || !maps.Equal(got.ExtFields, want.ExtFields) ||
			(got.ExtFields == nil) != (want.ExtFields == nil) {
			t.Fatalf("%q: scanner %+v, encoding/json %+v", b, got, want)
		}
	})
}

// FuzzAppendJSONHeader holds appendJSONHeader to encoding/json, byte for
// byte.
func FuzzAppendJSONHeader(f *testing.F) {
	f.Add(int32(0), "GO", "", "msgId", "C0A8\x01<&>\u2028\xff\"\\\b\f\n\r\t\x00\x1f", "queueId", "3")
	f.Add(int32(-5), "JAVA", "a remark", "", "", "k", "v")
	f.Fuzz(func(t *testing.T, code int32, lang, remark, k1, v1, k2, v2 string) {
		for _, ext := range []map[string]string{nil, {}, {k1: v1, k2: v2}} {
			h := jsonHeader{Code: code, Language: lang, Version: code / 3, Opaque: ^code, Flag: code & 3, Remark: remark,
				ExtFields: ext, SerializeTypeCurrentRPC: v1}
			want, err := json.Marshal(h)
			if err != nil {
				t.Fatal(err)
			}
			if got := appendJSONHeader(nil, &h); string(got) != string(want) {
				t.Fatalf("appendJSONHeader:\n%s\nencoding/json:\n%s", got, want)
			}
		}
	})
}
