package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raftmq/raftmq/internal/history"
	"github.com/raftmq/raftmq/internal/localgroup"
)

// lockedBuffer is a bytes buffer a running process writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestProcessProduceInterruptedReportsEveryMessage: `raftmq produce`
// reading a big input and interrupted with SIGINT stops reading and
// sending, and ends with "acknowledged N, failed N, outcome unknown N"
// such that acknowledged <= stored <= acknowledged + unknown, every
// acknowledged message is stored where its ack said, and no message it
// lists as failed is.
func TestProcessProduceInterruptedReportsEveryMessage(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 1)
	const topic, total = "interrupt", 200000
	c.mustCLI("", "topic", "create", topic, "--queues", "4", "-s", c.addrs())

	in := filepath.Join(t.TempDir(), "input")
	var sb strings.Builder
	for i := 1; i <= total; i++ {
		fmt.Fprintf(&sb, "m-%06d\n", i)
	}
	if err := os.WriteFile(in, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(in)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*procCLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, procBinary(t), "produce", "--topic", topic, "-s", c.addrs(), "--format", "json")
	cmd.Env = localgroup.Env()
	cmd.Stdin = f
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	procWaitFor(t, procCLITimeout, "some acknowledgements", func() (bool, string) {
		n := strings.Count(stdout.String(), "\n")
		return n >= 5000, fmt.Sprintf("%d acks", n)
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("produce did not exit after SIGINT:\n%s", procCut(stderr.String(), 2000))
	}
	if err == nil {
		t.Errorf("an interrupted produce exited 0")
	}
	errOut := strings.TrimSpace(stderr.String())
	t.Logf("stderr:\n%s", procCut(errOut, 2000))
	lines := strings.Split(errOut, "\n")
	m := regexp.MustCompile(`^acknowledged (\d+), failed (\d+), outcome unknown (\d+)$`).FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("the last line of stderr is not the summary: %q", lines[len(lines)-1])
	}
	acked, _ := strconv.Atoi(m[1])
	failed, _ := strconv.Atoi(m[2])
	unknown, _ := strconv.Atoi(m[3])
	if acked+failed+unknown >= total {
		t.Fatalf("produce sent its whole input before the interrupt; the test proves nothing (%s)", m[0])
	}
	acks := procJSONLines[procCLIAck](t, stdout.String())
	if len(acks) != acked {
		t.Errorf("stdout has %d acks, the summary says %d", len(acks), acked)
	}
	failedLines := map[string]bool{}
	for _, l := range lines {
		if _, list, ok := strings.Cut(l, "failed, not stored (safe to send again): lines "); ok {
			for _, r := range strings.Split(list, ", ") {
				a, b, _ := strings.Cut(r, "-")
				lo, _ := strconv.Atoi(a)
				hi := lo
				if b != "" {
					hi, _ = strconv.Atoi(b)
				}
				for i := lo; i <= hi; i++ {
					failedLines[fmt.Sprintf("m-%06d", i)] = true
				}
			}
		}
	}
	if len(failedLines) != failed {
		t.Errorf("stderr lists %d failed lines, the summary says %d", len(failedLines), failed)
	}

	// What is stored, once the requests the CLI left in flight have landed.
	nd := c.node("n1")
	end := procSettledEnd(t, c, topic)
	log := procReadNode(t, nd, topic, end)
	stored := 0
	for _, es := range log {
		stored += len(es)
	}
	if stored < acked || stored > acked+unknown {
		t.Errorf("stored %d messages; want acknowledged %d <= stored <= acknowledged + unknown %d", stored, acked, acked+unknown)
	}
	// What the CLI said of every input line: acknowledged (with its
	// position), failed, or neither (outcome unknown).
	ackOf := map[string]procCLIAck{}
	for _, a := range acks {
		ackOf[a.Body] = a
	}
	h := &history.History{Topic: topic, Final: log}
	for i := 1; i <= total; i++ {
		body := fmt.Sprintf("m-%06d", i)
		op := history.Op{Worker: "produce", Seq: uint64(i), Outcome: history.OutcomeUnknown,
			Messages: []history.SentMessage{{Body: body, Hash: history.BodyHash([]byte(body)), Queue: -1}}}
		if a, ok := ackOf[body]; ok {
			op.Outcome, op.Acks = history.OutcomeOK, []history.Ack{{Queue: a.Queue, Offset: a.Offset, ID: a.ID}}
		} else if failedLines[body] {
			op.Outcome = history.OutcomeFail
		}
		h.Ops = append(h.Ops, op)
	}
	if r := history.Check(h); !r.OK() {
		t.Errorf("what is stored does not match what produce reported: %s", r.Errors())
	}
	t.Logf("%s; stored %d", m[0], stored)
}

// procSettledEnd waits until the topic's queues stop growing (requests a
// client left in flight have landed) and returns their end offsets.
func procSettledEnd(t *testing.T, c *procCluster, topic string) map[int32]uint64 {
	t.Helper()
	cl := c.client()
	var end map[int32]uint64
	stable, last := 0, uint64(0)
	procWaitFor(t, procLeaderTimeout, "the topic to stop growing", func() (bool, string) {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		ti, err := cl.DescribeTopic(dctx, topic)
		if err != nil {
			return false, err.Error()
		}
		end = map[int32]uint64{}
		sum := uint64(0)
		for _, q := range ti.QueueInfo {
			end[q.Queue] = q.MaxOffset
			sum += q.MaxOffset
		}
		if sum == last {
			stable++
		} else {
			stable, last = 0, sum
		}
		time.Sleep(200 * time.Millisecond)
		return stable >= 5, fmt.Sprintf("%d messages", sum)
	})
	return end
}

// TestProcessBenchInterruptedReportsEveryMessage: `raftmq bench produce`
// interrupted with SIGINT ends with the same summary line as produce, and
// what the topic holds (less one warm-up message per producer) lies between
// acknowledged and acknowledged + unknown.
func TestProcessBenchInterruptedReportsEveryMessage(t *testing.T) {
	procRequire(t)
	c := procStartCluster(t, 1)
	const topic, producers = "bench-interrupt", 2
	ctx, cancel := context.WithTimeout(context.Background(), 2*procCLITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, procBinary(t), "bench", "produce", "--topic", topic, "-s", c.addrs(),
		"--count", "0", "--duration", "2m", "--producers", strconv.Itoa(producers), "--window", "64", "--size", "64")
	cmd.Env = localgroup.Env()
	var stdout, stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	procWaitFor(t, procCLITimeout, "the bench to run", func() (bool, string) {
		ti, err := c.client().DescribeTopic(context.Background(), topic)
		if err != nil {
			return false, err.Error()
		}
		sum := uint64(0)
		for _, q := range ti.QueueInfo {
			sum += q.MaxOffset
		}
		return sum >= 2000, fmt.Sprintf("%d messages", sum)
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf("bench did not exit after SIGINT:\n%s", procCut(stderr.String(), 2000))
	}
	errOut := strings.TrimSpace(stderr.String())
	lines := strings.Split(errOut, "\n")
	m := regexp.MustCompile(`^acknowledged (\d+), failed (\d+), outcome unknown (\d+)$`).FindStringSubmatch(lines[len(lines)-1])
	if m == nil {
		t.Fatalf("the last line of stderr is not the summary: %q\n%s", lines[len(lines)-1], procCut(errOut, 2000))
	}
	acked, _ := strconv.Atoi(m[1])
	unknown, _ := strconv.Atoi(m[3])
	stored := 0
	for _, e := range procSettledEnd(t, c, topic) {
		stored += int(e)
	}
	stored -= producers // the warm-up messages, outside the count
	if stored < acked || stored > acked+unknown {
		t.Errorf("stored %d measured messages; want acknowledged %d <= stored <= acknowledged + unknown %d", stored, acked, acked+unknown)
	}
	t.Logf("%s; stored %d", m[0], stored)
}
