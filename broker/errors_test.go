package broker

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/raftmq/raftmq/store"
)

// TestFailedPreconditionSaysDefiniteFailure: a produce request refused for
// a sequence older than the dedupe window is a definite failure and its
// text says so, never "outcome unknown".
func TestFailedPreconditionSaysDefiniteFailure(t *testing.T) {
	stale := (&Broker{}).replicaErr(fmt.Errorf("%w: producer %q sequence 3, window starts after 9", store.ErrStaleSequence, "p"))
	if !errors.Is(stale, ErrFailedPrecondition) || errors.Is(stale, ErrUnknownOutcome) {
		t.Errorf("%v: want ErrFailedPrecondition only", stale)
	}
	if strings.Contains(stale.Error(), "unknown") || !strings.Contains(stale.Error(), "not appended") {
		t.Errorf("%q: the text of a definite failure must say the request was not appended, not that the outcome is unknown", stale)
	}
	if !errors.Is(stale, store.ErrStaleSequence) {
		t.Errorf("%v: replica's error is not wrapped", stale)
	}
}
