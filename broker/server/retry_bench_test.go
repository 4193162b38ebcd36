package server_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/internal/servertest"
	"github.com/raftmq/raftmq/mq"
)

// BenchmarkSendBack measures a consumer's "retry later" as the broker serves
// it: read the message by id on the leader, build the copy, store it in
// %RETRY%<group> through raft (3 nodes on loopback TCP). parallel=1 is one
// consumer waiting for each answer; parallel=16 shows the group commit.
func BenchmarkSendBack(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("parallel=%d", par), func(b *testing.B) {
			c := servertest.New(b, 3)
			c.Leader()
			cl := c.Client(b)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			if _, err := cl.CreateTopic(ctx, "bench", 4, false); err != nil {
				b.Fatal(err)
			}
			p := cl.NewProducer()
			var ids []string
			for len(ids) < b.N {
				n := min(b.N-len(ids), 512)
				msgs := make([]client.Message, n)
				for i := range msgs {
					msgs[i] = client.Message{Body: make([]byte, 1024), Key: fmt.Sprint(len(ids) + i)}
				}
				acks, err := p.Send(ctx, "bench", msgs...)
				if err != nil {
					b.Fatal(err)
				}
				for _, a := range acks {
					ids = append(ids, a.Id)
				}
			}
			if _, err := cl.SendBack(ctx, "bench-g", ids[0], 0, 0); err != nil { // creates %RETRY%bench-g
				b.Fatal(err)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			next := make(chan string)
			for range par {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for id := range next {
						if _, err := cl.SendBack(ctx, "bench-g", id, 0, 0); err != nil {
							b.Error(err)
						}
					}
				}()
			}
			for _, id := range ids {
				next <- id
			}
			close(next)
			wg.Wait()
			b.StopTimer()
			ti, err := cl.DescribeTopic(ctx, mq.RetryTopic("bench-g"))
			if err != nil {
				b.Fatal(err)
			}
			// ids[0] was sent back twice and stored once (dedupe).
			if got := ti.QueueInfo[0].MaxOffset; got != uint64(b.N) {
				b.Fatalf("%d copies in the retry topic, want %d", got, b.N)
			}
		})
	}
}

// BenchmarkRetryRoundTrip measures what one retry costs a push consumer
// end to end: from the handler's first delivery answered retry-later to the
// second delivery of the same message from %RETRY%<group> (SendBack: the
// read by id, the copy's commit; then the retry queue's long poll waking).
// One message is in flight at a time, so this is latency, not queueing. The
// delay of the retry's level is not part of it: the figure is what the group
// spends beside that wait.
func BenchmarkRetryRoundTrip(b *testing.B) {
	c := servertest.New(b, 3)
	c.Leader()
	cl := c.Client(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, "rt", 4, false); err != nil {
		b.Fatal(err)
	}
	var first time.Time
	back := make(chan time.Duration, 1)
	cfg := pushConfig("rt", "rt-g", func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		if msgs[0].ReconsumeTimes == 0 {
			first = time.Now()
			return client.ConsumeRetryLater
		}
		back <- time.Since(first)
		return client.ConsumeSuccess
	})
	cfg.Concurrency = 1
	cfg.Wait = 5 * time.Second // a long poll waits where the copy arrives
	pc, err := cl.NewPushConsumer(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pc.Close(ctx)
	p := cl.NewProducer()
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if _, err := p.Send(ctx, "rt", client.Message{Body: []byte(fmt.Sprint(i))}); err != nil {
			b.Fatal(err)
		}
		select {
		case d := <-back:
			took = append(took, d)
		case <-ctx.Done():
			b.Fatal("the message did not come back")
		}
	}
	b.StopTimer()
	sortDurations(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}

func sortDurations(d []time.Duration) { sort.Slice(d, func(i, j int) bool { return d[i] < d[j] }) }
