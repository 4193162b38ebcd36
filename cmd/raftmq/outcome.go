package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/raftmq/raftmq/client"
)

// sendSummary is the last line on stderr of every command that sends
// messages (produce, bench produce): what became of each message.
// acknowledged <= stored <= acknowledged + outcome unknown, and a failed
// message is not stored, so sending the failed ones again never duplicates.
func sendSummary(acked, failed, unknown uint64) string {
	return fmt.Sprintf("acknowledged %d, failed %d, outcome unknown %d", acked, failed, unknown)
}

// lineRange is input lines first..last (1-based).
type lineRange struct{ first, last int }

// sendTally counts the outcome of every message a command sent or meant
// to send, and where in the input the failed and unknown ones were.
type sendTally struct {
	acked, failed, unknown int
	failedAt, unknownAt    []lineRange
	firstFail, firstUnk    error
	// failBare: firstFail says only that the messages were not sent
	// (client.ErrNotSent, e.g. a queued send whose time ran out); a failure
	// that says why replaces it.
	failBare bool
}

// add records the outcome of the n messages from input line first on.
func (t *sendTally) add(first, n int, err error) {
	r := lineRange{first, first + n - 1}
	switch client.Classify(err) {
	case client.Acknowledged:
		t.acked += n
	case client.Failed:
		t.failed += n
		t.failedAt = append(t.failedAt, r)
		bare := errors.Is(err, client.ErrNotSent) && !errors.Is(err, client.ErrNoConnection) && !hasStatus(err)
		if t.firstFail == nil || (t.failBare && !bare) {
			t.firstFail, t.failBare = clean(err), bare
		}
	default:
		t.unknown += n
		t.unknownAt = append(t.unknownAt, r)
		if t.firstUnk == nil {
			t.firstUnk = clean(err)
		}
	}
}

// report prints notes, the lines that failed or whose outcome is unknown,
// the first error of each kind, and last the summary line. It returns an
// error (already printed) unless every message was acknowledged and there
// are no notes.
func (t *sendTally) report(w io.Writer, cmd, noun string, notes []string) error {
	for _, n := range notes {
		fmt.Fprintf(w, "raftmq: %s: %s\n", cmd, n)
	}
	if t.failed > 0 {
		fmt.Fprintf(w, "raftmq: %s: failed, not stored (safe to send again): %s %s\n", cmd, noun, ranges(t.failedAt))
		if t.firstFail != nil {
			fmt.Fprintf(w, "raftmq: %s: first failure: %v\n", cmd, t.firstFail)
		}
	}
	if t.unknown > 0 {
		fmt.Fprintf(w, "raftmq: %s: outcome unknown, may be stored (sending again may duplicate them): %s %s\n", cmd, noun, ranges(t.unknownAt))
		fmt.Fprintf(w, "raftmq: %s: first unknown outcome: %v\n", cmd, t.firstUnk)
	}
	fmt.Fprintln(w, sendSummary(uint64(t.acked), uint64(t.failed), uint64(t.unknown)))
	if t.failed > 0 || t.unknown > 0 || len(notes) > 0 {
		return reported{1}
	}
	return nil
}

// ranges is rs sorted and merged: "1-64, 129-130, 200".
func ranges(rs []lineRange) string {
	rs = append([]lineRange(nil), rs...)
	sort.Slice(rs, func(i, j int) bool { return rs[i].first < rs[j].first })
	var merged []lineRange
	for _, r := range rs {
		if n := len(merged); n > 0 && r.first <= merged[n-1].last+1 {
			merged[n-1].last = max(merged[n-1].last, r.last)
			continue
		}
		merged = append(merged, r)
	}
	parts := make([]string, len(merged))
	for i, r := range merged {
		if r.first == r.last {
			parts[i] = fmt.Sprint(r.first)
		} else {
			parts[i] = fmt.Sprintf("%d-%d", r.first, r.last)
		}
	}
	return strings.Join(parts, ", ")
}

// hasStatus reports whether err carries a gRPC status from a node (a
// refusal that says why), wrapped or not.
func hasStatus(err error) bool {
	var se interface{ GRPCStatus() *status.Status }
	return errors.As(err, &se)
}
