package remoting

import (
	"fmt"
	"strings"
	"testing"

	rmq "github.com/raftmq/raftmq/remoting"
)

func TestParseResetHeader(t *testing.T) {
	for _, tc := range []struct {
		ext  map[string]string
		want string // the header as %+v, or the error's start
	}{
		{map[string]string{"topic": "t", "group": "g", "timestamp": "1700000000000", "isForce": "true"}, "{topic:t group:g timestamp:1700000000000 force:true queue:-1 offset:-1}"},
		{map[string]string{"topic": "t", "group": "g", "timestamp": "-1", "isForce": "false", "queueId": "2", "offset": "7"}, "{topic:t group:g timestamp:-1 force:false queue:2 offset:7}"},
		{map[string]string{"topic": "t", "group": "g", "timestamp": "5", "queueId": "-1", "offset": "null"}, "{topic:t group:g timestamp:5 force:false queue:-1 offset:-1}"},
		{map[string]string{"topic": "t", "timestamp": "5"}, "fields topic and group are required"},
		{map[string]string{"topic": "t", "group": "g"}, "field timestamp is required"},
		{map[string]string{"topic": "t", "group": "g", "timestamp": "x"}, "field timestamp"},
		{map[string]string{"topic": "t", "group": "g", "timestamp": "-2"}, "field timestamp: -2"},
		{map[string]string{"topic": "t", "group": "g", "timestamp": "1", "isForce": "yes"}, "field isForce"},
		{map[string]string{"topic": "t", "group": "g", "timestamp": "1", "queueId": "-5"}, "field queueId"},
		{map[string]string{"topic": "t", "group": "g", "timestamp": "1", "offset": "3"}, "field offset 3 without a queueId"},
		{map[string]string{"topic": "t", "group": "g", "timestamp": "1", "queueId": "0", "offset": "-3"}, "field offset"},
	} {
		h, err := parseResetHeader(&rmq.Command{Ext: tc.ext})
		got := fmt.Sprintf("%+v", h)
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%v: %s, want %s", tc.ext, got, tc.want)
		}
	}
}

// FuzzParseResetHeader: any header decodes to an error or to a request
// within bounds.
func FuzzParseResetHeader(f *testing.F) {
	f.Add("t", "g", "1700000000000", "true", "-1", "")
	f.Add("t", "g", "-1", "false", "3", "10")
	f.Add("", "", "x", "maybe", "99999999999", "-1")
	f.Fuzz(func(t *testing.T, topic, group, ts, force, queue, offset string) {
		h, err := parseResetHeader(&rmq.Command{Ext: map[string]string{"topic": topic, "group": group, "timestamp": ts, "isForce": force, "queueId": queue, "offset": offset}})
		if err != nil {
			return
		}
		if h.topic == "" || h.group == "" || h.timestamp < -1 || h.queue < -1 || h.queue > 1<<20 || h.offset < -1 || h.offset >= 0 && h.queue < 0 {
			t.Fatalf("decoded to %+v", h)
		}
	})
}

func TestDecodeProperties(t *testing.T) {
	for in, want := range map[string]string{
		"a=1\nb: 2\n# c=3\n! d=4\n\n  e = five \n": "a=1;b=2;e=five;",
		"":                             "",
		"novalue":                      "error: line 1",
		"=x":                           "error: line 1",
		strings.Repeat("k=v\n", 20000): "error: 80000 bytes",
	} {
		m, err := decodeProperties([]byte(in))
		var got string
		if err != nil {
			got = "error: " + err.Error()
		} else {
			for _, k := range []string{"a", "b", "c", "d", "e"} {
				if v, ok := m[k]; ok {
					got += k + "=" + v + ";"
				}
			}
		}
		if !strings.HasPrefix(got, want) || want == "" && got != "" {
			t.Errorf("%.40q: %q, want %q", in, got, want)
		}
	}
}

// FuzzDecodeProperties: any UPDATE_BROKER_CONFIG body decodes to an error
// or to keys without separators.
func FuzzDecodeProperties(f *testing.F) {
	f.Add([]byte("brokerPermission=6\nflushDiskType=SYNC_FLUSH\n"))
	f.Add([]byte("# comment\n\n=x"))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := decodeProperties(body)
		if err != nil {
			return
		}
		for k := range m {
			if k == "" || strings.ContainsAny(k, "=:") {
				t.Fatalf("key %q from %q", k, body)
			}
		}
	})
}
