package chaos

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// writeNodeLog makes a data directory holding the given entries (index 1
// on) and a stable store at term.
func writeNodeLog(t *testing.T, dir string, term uint64, datas [][]byte) {
	t.Helper()
	st, err := raftlog.Open(dir, raftlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i, d := range datas {
		logs = append(logs, &raft.Log{Index: uint64(i + 1), Term: term, Type: raft.LogCommand, Data: d})
	}
	if err := st.Log.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := st.Stable.SetUint64([]byte("CurrentTerm"), term); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

func sampleEntries() [][]byte {
	req := func(seq uint64, bodies ...string) *raftlog.Request {
		r := &raftlog.Request{ProducerID: "p1", Seq: seq, Topic: "chaos"}
		for i, b := range bodies {
			r.Messages = append(r.Messages, raftlog.Message{Queue: uint32(i % 2), Timestamp: 1000 + int64(seq), Key: "k", Tag: "t",
				Properties: map[string]string{"a": b}, Body: []byte(b + "|pad")})
		}
		return r
	}
	return [][]byte{
		store.EncodeCreateTopic("chaos", 2, true),
		raftlog.EncodeBatch(req(1, "w0-000001-0", "w0-000001-1"), req(2, "w0-000002-0")),
		store.EncodeRetain(2),
		raftlog.EncodeBatch(req(3, "w0-000003-0")),
	}
}

// The offline reader finds every message at the id the FSM gives it (log
// index, ordinal across the entry's requests), the retention cuts, and
// compares the nodes' logs entry by entry.
func TestReadDiskLogFindsMessagesAndCuts(t *testing.T) {
	base := t.TempDir()
	var logs []*DiskLog
	id := raftlog.MessageID(2, 2) // the third message of entry 2: seq 2's first
	scan := NewDiskScan([]string{id, raftlog.MessageID(4, 0), raftlog.MessageID(9, 0)})
	for _, n := range []string{"n1", "n2", "n3"} {
		dir := filepath.Join(base, n)
		writeNodeLog(t, dir, 3, sampleEntries())
		d, err := ReadDiskLog(n, dir, scan)
		if err != nil {
			t.Fatal(err)
		}
		if d.First != 1 || d.Last != 4 || d.StableTerm != 3 {
			t.Fatalf("%s: log %d..%d term %d", n, d.First, d.Last, d.StableTerm)
		}
		logs = append(logs, d)
	}
	if len(scan.Bad) != 0 {
		t.Fatalf("clean logs: %v", scan.Bad)
	}
	dm, ok := scan.Found[id]
	if !ok || dm.Body != "w0-000002-0" || dm.Seq != 2 || dm.Producer != "p1" || dm.Key != "k" || dm.Tag != "t" ||
		dm.Props != history.PropsHash(map[string]string{"a": "w0-000002-0"}) || dm.Hash != history.BodyHash([]byte("w0-000002-0|pad")) || dm.Timestamp != 1002 {
		t.Fatalf("message at %s: %+v (found %v)", id, dm, ok)
	}
	if _, ok := scan.Found[raftlog.MessageID(9, 0)]; ok {
		t.Fatal("found a message in an entry that does not exist")
	}
	if scan.Cut() != 2 {
		t.Fatalf("cut %d, want 2", scan.Cut())
	}
	if v := CompareDiskLogs(logs, 4); len(v) != 0 {
		t.Fatalf("identical logs: %v", v)
	}
	if v := CompareDiskLogs(logs, 5); len(v) != 3 {
		t.Fatalf("logs shorter than the applied index: %v", v)
	}
}

func TestCompareDiskLogsReportsDifferingEntry(t *testing.T) {
	base := t.TempDir()
	scan := NewDiskScan(nil)
	var logs []*DiskLog
	for _, n := range []string{"n1", "n2"} {
		es := sampleEntries()
		if n == "n2" {
			es[2] = store.EncodeRetain(3) // a metadata entry that differs
		}
		writeNodeLog(t, filepath.Join(base, n), 2, es)
		d, err := ReadDiskLog(n, filepath.Join(base, n), scan)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, d)
	}
	v := CompareDiskLogs(logs, 4)
	if len(v) != 1 || v[0].Kind != history.VDivergent || !strings.Contains(v[0].Detail, "log entry 3 on disk") {
		t.Fatalf("want entry 3 divergent: %v", v)
	}
}

func TestReadDiskLogReportsCorruptEntries(t *testing.T) {
	es := sampleEntries()
	es[1] = append([]byte(nil), es[1]...)
	es[1][len(es[1])-2] ^= 0x40 // inside a body: the batch CRC fails
	es[2] = append([]byte(nil), es[2]...)
	es[2][len(es[2])-3] ^= 0x01 // inside a metadata entry's JSON
	dir := t.TempDir()
	writeNodeLog(t, dir, 1, es)
	scan := NewDiskScan(nil)
	if _, err := ReadDiskLog("n1", dir, scan); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(scan.Bad)
	// raftlog.Open checks every entry it reads, the metadata CRC too.
	if len(scan.Bad) != 2 || !strings.Contains(got, "log entry 2 does not read back") || !strings.Contains(got, "log entry 3 does not read back") {
		t.Fatalf("want the batch and the metadata entry reported: %v", scan.Bad)
	}
}

// The size rule bounds what a retention cut keeps from above; a cut above
// the applied index is reported too.
func TestCheckCut(t *testing.T) {
	d := &DiskLog{Node: "n1", First: 10, Last: 13}
	for i := 0; i < 4; i++ {
		d.Entries = append(d.Entries, DiskEntry{Term: 1, Type: raft.LogCommand, Len: 1 << 20})
	}
	if v := checkCut([]*DiskLog{d}, 11, 13, 2<<20, 1<<20); len(v) != 0 {
		t.Fatalf("3 MiB kept with a 2 MiB limit and 1 MiB segments: %v", v)
	}
	if v := checkCut([]*DiskLog{d}, 10, 13, 2<<20, 1<<20); len(v) != 1 || v[0].Kind != history.VRetention {
		t.Fatalf("4 MiB kept with a 2 MiB limit: %v", v)
	}
	if v := checkCut([]*DiskLog{d}, 15, 13, 8<<20, 1<<20); len(v) != 1 || !strings.Contains(v[0].Detail, "above the applied index") {
		t.Fatalf("cut above the applied index: %v", v)
	}
}
