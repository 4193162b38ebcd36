package history

import "fmt"

// checkSendBacks checks the consumers' send-backs against the group's retry
// and dead-letter topics as read at the end:
//   - every acknowledged send-back has its copy (unless, in a retention
//     run, the copy's entry is below the last cut): in the retry topic, named
//     by its staged id (the copy waits for its delay level first), or, dead-
//     lettered, in the dead-letter topic at the id the answer named; with the
//     body that was sent back, the id of that message as its origin and a
//     reconsume count of 1;
//   - no message is copied twice (the broker dedupes send-backs per group
//     and source queue, so a retried or repeated send-back stores one copy);
//   - nothing is in either topic that no consumer sent back.
func checkSendBacks(h *History, sent map[string]sentRef, r *Report) {
	if len(h.SendBacks) == 0 {
		return
	}
	type copyAt struct {
		topic string
		e     LogEntry
	}
	byOrigin := map[string][]copyAt{}
	byID := map[string]copyAt{}
	for _, l := range []struct {
		topic   string
		entries []LogEntry
	}{{"retry", h.Retry}, {"dead-letter", h.DeadLetters}} {
		for _, e := range l.entries {
			c := copyAt{l.topic, e}
			byOrigin[e.Origin] = append(byOrigin[e.Origin], c)
			byID[e.ID] = c
			if e.Staged != "" {
				byID[e.Staged] = c
			}
			if _, ok := sent[e.Body]; !ok {
				r.Add(VInvented, "%s topic offset %d: body %q (origin %s) was never sent", l.topic, e.Offset, e.Body, e.Origin)
			}
		}
	}
	asked := map[string]bool{}
	for _, sb := range h.SendBacks {
		asked[sb.ID] = true
		if sb.Outcome != OutcomeOK {
			continue
		}
		r.SentBack++
		c, ok := byID[sb.CopyID]
		switch {
		case !ok && h.belowCut(sb.CopyID):
			// Its copy was stored (staged, for a retry) in an entry below
			// the last retention cut, and a delivered copy lies after its
			// staged entry: retention may have taken it.
			r.Retained++
		case (!ok || c.e.Origin != sb.ID) && h.crashAllows(sb.Complete) != nil:
			// Lost in the crash; another copy may have its index now.
			r.crashLoss(h.crashAllows(sb.Complete), sb.Complete)
		case !ok:
			r.Add(VLost, "consumer %s sent back %s (body %q), acknowledged as copy %s in %s, which is not there", sb.Consumer, sb.ID, sb.Body, sb.CopyID, sb.CopyTopic)
		case (c.topic == "dead-letter") != sb.DeadLettered:
			r.Add(VMisplaced, "send-back of %s (body %q) was answered dead-lettered=%v but its copy is in the %s topic", sb.ID, sb.Body, sb.DeadLettered, c.topic)
		case c.e.Body != sb.Body || c.e.Hash != sb.Hash || c.e.Origin != sb.ID || c.e.Reconsume != "1":
			r.Add(VCorrupt, "send-back of %s (body %q): its copy %s has body %q origin %q reconsume count %q, want the body sent back, that origin and 1",
				sb.ID, sb.Body, sb.CopyID, c.e.Body, c.e.Origin, c.e.Reconsume)
		}
	}
	for origin, cs := range byOrigin {
		if !asked[origin] {
			r.Add(VInvented, "the %s topic holds a copy of %s (body %q) that no consumer sent back", cs[0].topic, origin, cs[0].e.Body)
		}
		if len(cs) > 1 {
			var at []string
			for _, c := range cs {
				at = append(at, fmt.Sprintf("%s/%d", c.topic, c.e.Offset))
			}
			r.Add(VDuplicate, "message %s (body %q) was copied %d times by send-backs (%v)", origin, cs[0].e.Body, len(cs), at)
		}
	}
}
