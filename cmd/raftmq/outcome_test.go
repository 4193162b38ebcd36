package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/client"
)

// The first failure printed says why when any failure does: one that only
// says the messages were not sent gives way to a node's refusal, also a
// refusal wrapped in ErrNotSent (as the several-group producer wraps it).
func TestSendTallyKeepsAFailureThatSaysWhy(t *testing.T) {
	bare := fmt.Errorf("%w: %w", client.ErrNotSent, context.DeadlineExceeded)
	refused := fmt.Errorf("%w: group ga: %w", client.ErrNotSent, status.Error(codes.Unauthenticated, "call without credentials"))
	for _, order := range [][]error{{bare, refused}, {refused, bare}} {
		var tally sendTally
		for i, err := range order {
			tally.add(i+1, 1, err)
		}
		var out bytes.Buffer
		tally.report(&out, "produce", "arguments", nil)
		if !strings.Contains(out.String(), "first failure: ") || !strings.Contains(out.String(), "without credentials") {
			t.Errorf("failures %v: printed\n%s want the refusal as the first failure", order, out.String())
		}
	}
	var tally sendTally
	tally.add(1, 2, bare)
	var out bytes.Buffer
	tally.report(&out, "produce", "arguments", nil)
	if !strings.Contains(out.String(), "first failure: not sent: context deadline exceeded") {
		t.Errorf("a lone bare failure: printed\n%s", out.String())
	}
}
