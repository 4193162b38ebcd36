package store

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/raftmq/raftmq/raftlog"
)

// versionedLog is the requests of many entries: one or more requests,
// plain messages and messages with a key, a tag or properties, retries of
// requests one and two entries back (so that in a log of both versions a
// request and its retry are in different versions), and a request that
// reuses a sequence with other content.
func versionedLog(n int) [][]*raftlog.Request {
	var out [][]*raftlog.Request
	var seq uint64
	for i := range n {
		seq++
		m := raftlog.Message{Queue: uint32(i % 8), Timestamp: 1780000000000 + int64(i), Body: []byte(fmt.Sprint("body-", i))}
		switch i % 3 {
		case 1:
			m.Key, m.Tag = fmt.Sprint("key-", i%7), "tag"
		case 2:
			m.Properties = map[string]string{"UNIQ_KEY": fmt.Sprint(i), "a": ""}
		}
		reqs := []*raftlog.Request{{ProducerID: "p", Seq: seq, Topic: "t", Messages: []raftlog.Message{m}}}
		switch i % 6 {
		case 1:
			reqs[0].Messages = append(reqs[0].Messages, msgs(uint32((i+3)%8), "b", "c")...)
		case 2:
			reqs = append(reqs, &raftlog.Request{Topic: "u", Messages: msgs(uint32(i/6%2), "d")})
		case 3, 4:
			// A retry of the first request of the entry one or two back, as
			// its producer sent it (a later timestamp: not part of the
			// request's identity).
			back := out[len(out)-1-i%6+3][0]
			retry := *back
			retry.Messages = append([]raftlog.Message(nil), back.Messages...)
			retry.Messages[0].Timestamp += 5
			reqs = append(reqs, &retry)
		case 5:
			reqs = append(reqs, &raftlog.Request{ProducerID: "p", Seq: seq - 1, Topic: "t", Messages: msgs(0, "other")})
		}
		out = append(out, reqs)
	}
	return out
}

// TestBatchVersionsApplyAlike: the same requests applied as version 1
// entries, as version 2 entries and as a log of both mixed give the same
// answer for every entry (acks, duplicates, refusals) and the same
// locations in every queue; the mixed log's index, rebuilt from the log,
// is as it was.
func TestBatchVersionsApplyAlike(t *testing.T) {
	entries := versionedLog(600)
	encodings := []struct {
		name    string
		version func(i int) raftlog.BatchVersion
	}{
		{"v1", func(int) raftlog.BatchVersion { return raftlog.BatchV1 }},
		{"v2", func(int) raftlog.BatchVersion { return raftlog.BatchV2 }},
		{"mixed", func(i int) raftlog.BatchVersion { return raftlog.BatchVersion(1 + i%2) }},
	}
	var answers [][]string
	var locations []map[string][]Location
	var mixed *logged
	var mixedRebuilds *rebuilds
	for _, enc := range encodings {
		l := newLogged(t)
		rb := rebuildHere(l.f, l.log)
		l.apply(EncodeCreateTopic("t", 8, false))
		l.apply(EncodeCreateTopic("u", 2, false))
		var got []string
		for i, reqs := range entries {
			b := raftlog.NewBatchBuilder(0, enc.version(i))
			for _, r := range reqs {
				b.Add(r)
			}
			data := b.Finish()
			if data[1] != byte(enc.version(i)) {
				t.Fatalf("%s: entry %d is version %d", enc.name, i, data[1])
			}
			res, ok := l.apply(data).([]*ProduceResult)
			if !ok {
				t.Fatalf("%s: entry %d not applied", enc.name, i)
			}
			got = append(got, fmt.Sprintf("%+v", derefResults(res)))
		}
		if err := l.f.idx.Flush(); err != nil {
			t.Fatal(err)
		}
		answers = append(answers, got)
		locations = append(locations, l.every())
		if enc.name == "mixed" {
			mixed, mixedRebuilds = l, rb
		}
	}
	for k := 1; k < len(encodings); k++ {
		for i := range entries {
			if answers[k][i] != answers[0][i] {
				t.Fatalf("entry %d: %s answered %s, v1 %s", i, encodings[k].name, answers[k][i], answers[0][i])
			}
		}
		if !reflect.DeepEqual(locations[k], locations[0]) {
			t.Errorf("%s: the queues' locations differ from v1's", encodings[k].name)
		}
	}
	if dups := countOf(answers[0], "Duplicate:true"); dups == 0 {
		t.Fatal("no retry was found a duplicate: the log does not test dedupe")
	}

	mixed.loseEveryIndex(t, mixedRebuilds)
	if rebuilt, refused := mixed.f.IndexRebuilds(); rebuilt != 10 || refused != 0 {
		t.Fatalf("mixed: %d queues rebuilt, %d ranges refused; want 10, 0", rebuilt, refused)
	}
	if after := mixed.every(); !reflect.DeepEqual(after, locations[0]) {
		t.Error("mixed: the locations rebuilt from the log differ from those applied")
	}
}

func derefResults(res []*ProduceResult) []ProduceResult {
	out := make([]ProduceResult, len(res))
	for i, r := range res {
		out[i] = *r
	}
	return out
}

func countOf(answers []string, s string) int {
	n := 0
	for _, a := range answers {
		n += bytes.Count([]byte(a), []byte(s))
	}
	return n
}
