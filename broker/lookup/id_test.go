package lookup

import (
	"errors"
	"testing"

	"github.com/raftmq/raftmq/broker/brokererr"
	"github.com/raftmq/raftmq/raftlog"
)

func TestParseMessageID(t *testing.T) {
	index, ordinal, err := ParseMessageID(raftlog.MessageID(0x1234, 7))
	if err != nil || index != 0x1234 || ordinal != 7 {
		t.Fatalf("round trip: %d %d %v", index, ordinal, err)
	}
	for _, id := range []string{"", "abc", "000000000000000000000001", "zz0000000000000100000000", "0000000000000001zz000000"} {
		if _, _, err := ParseMessageID(id); !errors.Is(err, brokererr.ErrInvalidArgument) {
			t.Errorf("%q: %v, want invalid argument", id, err)
		}
	}
}
