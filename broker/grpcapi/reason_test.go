package grpcapi

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker/route"
)

// TestReasonsMatchTheWireEnum: route.Reason values are sent as
// api.SuggestionReason by number; the names must agree.
func TestReasonsMatchTheWireEnum(t *testing.T) {
	for _, r := range route.Reasons() {
		want := "SUGGESTION_REASON_" + strings.ToUpper(r.String())
		if got := api.SuggestionReason(r).String(); got != want {
			t.Errorf("broker reason %d is %s, the wire enum says %s", r, want, got)
		}
	}
	if n := len(api.SuggestionReason_name); n != len(route.Reasons())+1 {
		t.Errorf("wire enum has %d values, broker %d (+ unspecified)", n, len(route.Reasons()))
	}
}
