package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// TestProcessLeaderStalls freezes the leader (SIGSTOP) and, separately,
// cuts it off the network (every Raft link both ways and its client API
// blackholed: connections stay open, nothing passes), three times each,
// under SDK load and while a shell-style loop sends one message per fresh
// `raftmq produce` process. Clients must follow the new leader; after
// SIGCONT or heal the old leader rejoins as a follower; every acknowledged
// message is stored exactly once, and nothing the old leader could only
// have acknowledged alone appears. The windows (fault -> first
// acknowledged write) are logged, not asserted: they depend on the machine.
func TestProcessLeaderStalls(t *testing.T) {
	procRequire(t)
	for _, fault := range []string{"pause", "partition"} {
		t.Run(fault, func(t *testing.T) { procLeaderStalls(t, fault) })
	}
}

func procLeaderStalls(t *testing.T, fault string) {
	start := time.Now()
	c := procStartGroup(t, localgroup.Config{Nodes: 3, Partitionable: fault == "partition"})
	cl := c.client()
	topic := "stall-" + fault
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, topic, 4, false); err != nil {
		t.Fatal(err)
	}
	load := procStartLoad(t, cl, topic, "", 4, 5*time.Millisecond, 20000)
	load.waitAcks(100, 30*time.Second)
	shell := procStartShellLoop(c, topic)

	var sdkWin, cliWin []time.Duration
	for i := 1; i <= 3; i++ {
		l := c.waitLeader("")
		t0 := time.Now()
		switch fault {
		case "pause":
			c.pause(l.ID)
		case "partition":
			if err := c.g.Cut(l.ID); err != nil {
				t.Fatal(err)
			}
		}
		nl := c.waitLeader(l.ID)
		elected := time.Since(t0)
		load.waitAcks(20, 60*time.Second)
		shell.waitAcks(t, t0, 60*time.Second)
		sw, cw := procWindow(load.acked(), t0), procWindow(shell.acked(), t0)
		sdkWin, cliWin = append(sdkWin, sw), append(cliWin, cw)
		t.Logf("%s %d of leader %s: %s leads (seen after %v); first acknowledged write after %v (SDK), %v (fresh CLI process per message)",
			fault, i, l.ID, nl.ID, elected.Round(time.Millisecond), sw.Round(time.Millisecond), cw.Round(time.Millisecond))
		time.Sleep(time.Until(t0.Add(2 * time.Second)))
		switch fault {
		case "pause":
			c.resume(l.ID)
		case "partition":
			if err := c.g.Heal(l.ID); err != nil {
				t.Fatal(err)
			}
		}
		c.waitFollower(l.ID, 60*time.Second)
	}
	load.waitAcks(20, 30*time.Second)
	load.stop()
	shell.stop()
	load.checkNoFailures()
	shell.checkNoFailures(t)
	c.waitConverged(30 * time.Second)
	procVerify(t, c, cl, topic, append(load.sends(), shell.sends()...))
	t.Logf("%s: windows SDK %v, CLI %v; took %v", fault, sdkWin, cliWin, time.Since(start).Round(time.Millisecond))
}

// procWindow is when writes resumed after a fault at t0: the end of the
// longest gap between consecutive acknowledgements that ends after t0,
// measured from t0.
func procWindow(acks []procAck, t0 time.Time) time.Duration {
	times := make([]time.Time, len(acks))
	for i, a := range acks {
		times[i] = a.At
	}
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	var gap time.Duration
	var end time.Time
	for i := 1; i < len(times); i++ {
		if times[i].After(t0) && times[i].Sub(times[i-1]) > gap {
			gap, end = times[i].Sub(times[i-1]), times[i]
		}
	}
	if end.IsZero() {
		return 0
	}
	return end.Sub(t0)
}

// procShellLoop sends numbered messages of one key, each with a fresh
// `raftmq produce` process, one after the other, like a user's shell loop.
type procShellLoop struct {
	stopc chan struct{}
	wg    sync.WaitGroup

	mu    sync.Mutex
	acks  []procAck
	ops   []history.Op
	fails []string
}

func procStartShellLoop(c *procCluster, topic string) *procShellLoop {
	s := &procShellLoop{stopc: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for seq := 1; ; seq++ {
			select {
			case <-s.stopc:
				return
			default:
			}
			body := fmt.Sprintf("cli-%d", seq)
			op := history.Op{Worker: "shell", Seq: uint64(seq), Invoke: procNow(),
				Messages: []history.SentMessage{{Body: body, Hash: history.BodyHash([]byte(body)), Key: "cli-k", Queue: -1}}}
			out, errOut, err := c.cli("", "produce", "-s", c.addrs(), "-t", topic, "-k", "cli-k", "--format", "json", body)
			var a procCLIAck
			if err == nil {
				err = json.Unmarshal([]byte(strings.TrimSpace(out)), &a)
			}
			op.Complete = procNow()
			s.mu.Lock()
			if err != nil {
				// A CLI that failed may have stored the message.
				op.Outcome, op.Error = history.OutcomeUnknown, err.Error()
				s.fails = append(s.fails, fmt.Sprintf("%s: %v: %s", body, err, procCut(errOut, 500)))
			} else {
				op.Outcome, op.Acks = history.OutcomeOK, []history.Ack{{Queue: a.Queue, Offset: a.Offset, ID: a.ID}}
				s.acks = append(s.acks, procAck{Body: body, Key: "cli-k", Queue: a.Queue, Offset: a.Offset, ID: a.ID, At: time.Now()})
			}
			s.ops = append(s.ops, op)
			s.mu.Unlock()
		}
	}()
	return s
}

func (s *procShellLoop) sends() []history.Op {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]history.Op{}, s.ops...)
}

func (s *procShellLoop) acked() []procAck {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]procAck{}, s.acks...)
}

// waitAcks waits until three messages were acknowledged after t0, so that
// the longest gap after t0 is the outage, not a send that was already
// finishing when the fault came.
func (s *procShellLoop) waitAcks(t *testing.T, t0 time.Time, timeout time.Duration) {
	t.Helper()
	procWaitFor(t, timeout, "3 acknowledgements of CLI produces", func() (bool, string) {
		after := 0
		for _, a := range s.acked() {
			if a.At.After(t0) {
				after++
			}
		}
		s.mu.Lock()
		fails := len(s.fails)
		s.mu.Unlock()
		return after >= 3, fmt.Sprintf("%d acknowledged after the fault, %d failed", after, fails)
	})
}

func (s *procShellLoop) stop() {
	close(s.stopc)
	s.wg.Wait()
}

func (s *procShellLoop) checkNoFailures(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.fails) > 0 {
		t.Errorf("%d CLI produces failed, e.g. %s", len(s.fails), s.fails[0])
	}
}
