package remoting_test

import (
	"fmt"
	"testing"
	"time"

	rmq "github.com/raftmq/raftmq/remoting"
)

// A follower that forwards a send while its leader has just died (it may
// not have noticed yet, and then no leader is known until the election)
// waits for the new leader within the send's timeout and forwards the send
// to it (or stores it, when it leads itself), instead of answering
// SERVICE_NOT_AVAILABLE at once.
func TestSendThroughAFollowerWaitsOutTheElection(t *testing.T) {
	for run := 0; run < 2; run++ {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			f := newFixture(t)
			f.createTopic("fo", 2)
			l := f.c.Leader()
			fol := []int{(l + 1) % 3, (l + 2) % 3}
			if r := f.invoke(f.addr(fol[run]), rmq.SendMessage, sendExt("fo", 0, map[string]string{"UNIQ_KEY": "before"}), []byte("x")); r.Code != rmq.Success {
				t.Fatalf("send before the kill: %d %s", r.Code, r.Remark)
			}
			f.c.Kill(l)
			start := time.Now()
			for i := 0; i < 5; i++ {
				r := f.invoke(f.addr(fol[run]), rmq.SendMessage, sendExt("fo", 1, map[string]string{"UNIQ_KEY": fmt.Sprintf("after-%d", i)}), []byte("y"))
				if r.Code != rmq.Success {
					t.Fatalf("send %d through follower %d after the leader's kill (%v after it): %d %s", i, fol[run], time.Since(start), r.Code, r.Remark)
				}
				if i == 0 {
					t.Logf("first send through a follower acknowledged %v after the kill", time.Since(start))
				}
			}
		})
	}
}
