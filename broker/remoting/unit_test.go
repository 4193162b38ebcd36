package remoting

import (
	"testing"
)

func TestPhysicalOffsetNamesTheMessage(t *testing.T) {
	for _, c := range []struct {
		index uint64
		ord   uint32
	}{{1, 0}, {12345, 7}, {1<<39 - 1, 1<<24 - 1}} {
		id := messageIDOf(c.index, c.ord)
		p := physicalOffset(id)
		if p <= 0 && c.index > 0 {
			t.Fatalf("%s: physical offset %d", id, p)
		}
		if back := messageID(p); back != id {
			t.Fatalf("%s -> %d -> %s", id, p, back)
		}
	}
	if physicalOffset("short") != 0 || physicalOffset("ZZZZZZZZZZZZZZZZZZZZZZZZ") != 0 {
		t.Fatal("a malformed id got an offset")
	}
}

func messageIDOf(index uint64, ord uint32) string { return messageID(int64(index<<24 | uint64(ord))) }

func TestNumbering(t *testing.T) {
	ids := numbering("n2", []string{"n3", "n1", "n2"})
	if ids["n2"] != 0 || ids["n1"] != 1 || ids["n3"] != 2 {
		t.Fatalf("%v", ids)
	}
	v := &view{self: "n1", leader: "n2", ids: ids}
	if v.brokerID("n3") != 2 || v.brokerID("") != 0 || v.brokerID("unknown") != 0 || v.isLeader() {
		t.Fatalf("view %+v", v)
	}
}
