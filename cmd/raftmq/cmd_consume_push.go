package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/mq"
)

// The flags of consume that make it a push consumer whose handler can
// answer "retry later", so the retry flow can be watched.
func pushConsumeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "retry-every", Usage: "answer every Nth delivery with retry-later (the group delivers it again after its retry delay)"},
		&cli.StringFlag{Name: "exec", Usage: "run this shell command per message (body on stdin; RAFTMQ_ID, RAFTMQ_TOPIC, RAFTMQ_RECONSUME_TIMES, RAFTMQ_KEY, RAFTMQ_TAG set): exit 0 is success, anything else retry-later"},
		&cli.BoolFlag{Name: "orderly", Usage: "with --retry-every/--exec: consume each queue in order, retrying a failed message in place"},
		&cli.IntFlag{Name: "max-reconsume", Usage: "with --retry-every/--exec: retries before a message is dead-lettered (0: the group's setting)"},
		&cli.IntFlag{Name: "retry-delay-level", Usage: "with --retry-every/--exec: delay level of a retry, 1..18 (0: the broker's 3 + reconsume count)"},
		&cli.DurationFlag{Name: "idle", Value: 3 * time.Second, Usage: "with --retry-every/--exec and without --follow: exit after this long without a delivery"},
	}
}

func pushMode(c *cli.Context) bool { return c.Int("retry-every") > 0 || c.String("exec") != "" }

type pushedJSON struct {
	Topic          string            `json:"topic"`
	Queue          int32             `json:"queue"`
	Offset         uint64            `json:"offset"`
	StoredTopic    string            `json:"stored_topic"`
	ID             string            `json:"id"`
	OriginID       string            `json:"origin_id"`
	Key            string            `json:"key,omitempty"`
	Tag            string            `json:"tag,omitempty"`
	Properties     map[string]string `json:"properties,omitempty"`
	Body           string            `json:"body"`
	ReconsumeTimes int32             `json:"reconsume_times"`
	Result         string            `json:"result"`
	Node           string            `json:"node"`
}

// runPushConsume is consume with --retry-every or --exec.
func runPushConsume(c *cli.Context, topic, format string) error {
	if c.Int("retry-every") < 0 {
		return usageError(c, "--retry-every %d: want a positive count", c.Int("retry-every"))
	}
	if len(c.IntSlice("queue")) > 0 {
		return usageError(c, "--queue does not combine with --retry-every/--exec: retries go through the group")
	}
	if c.String("group") == "" {
		return usageError(c, "--retry-every/--exec/--orderly need --group: a message handed back goes to the group's retry topic")
	}
	if c.IsSet("offset") {
		return usageError(c, "--offset positions a reader; --retry-every/--exec/--orderly consume as a group (move its offsets with 'raftmq group reset')")
	}
	encode, err := bodyEncoder(c)
	if err != nil {
		return err
	}
	cl, err := newClient(c)
	if err != nil {
		return err
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		n        int
		last     = time.Now()
		limitHit = make(chan struct{})
		hitOnce  sync.Once
	)
	limit, every, cmd := c.Int("max"), c.Int("retry-every"), c.String("exec")
	out := c.App.Writer
	handler := func(ctx context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		res := client.ConsumeSuccess
		for _, m := range msgs {
			mu.Lock()
			n++
			nth := n
			last = time.Now()
			mu.Unlock()
			r := client.ConsumeSuccess
			if every > 0 && nth%every == 0 {
				r = client.ConsumeRetryLater
			}
			if cmd != "" && r == client.ConsumeSuccess {
				r = runHandler(ctx, cmd, m)
			}
			if r != client.ConsumeSuccess {
				res = r
			}
			mu.Lock()
			if format == "json" {
				b, _ := json.Marshal(pushedJSON{Topic: m.Topic, Queue: m.Queue, Offset: m.Offset, StoredTopic: m.StoredTopic, ID: m.ID, OriginID: m.OriginID,
					Key: m.Key, Tag: m.Tag, Properties: m.Properties, Body: encode(m.Body), ReconsumeTimes: m.ReconsumeTimes, Result: r.String(), Node: m.ServedBy})
				fmt.Fprintln(out, string(b))
			} else {
				where := fmt.Sprintf("%d:%d", m.Queue, m.Offset)
				if m.StoredTopic != m.Topic {
					where = m.StoredTopic + " " + where
				}
				retried := ""
				if m.ReconsumeTimes > 0 {
					retried = fmt.Sprintf("\t(reconsume %d, origin %s)", m.ReconsumeTimes, m.OriginID)
				}
				fmt.Fprintf(out, "%s\t%s\t%s%s\n", where, encode(m.Body), r, retried)
			}
			mu.Unlock()
			if limit > 0 && nth >= limit {
				hitOnce.Do(func() { close(limitHit) })
			}
		}
		return res
	}
	cfg := client.DefaultPushConfig(topic, c.String("group"), handler)
	cfg.From = c.String("from")
	cfg.FollowerReads = c.Bool("follower-reads")
	cfg.Orderly = c.Bool("orderly")
	cfg.Tags, cfg.SQL = c.String("tag"), c.String("sql")
	if c.Bool("broadcast") {
		return usageError(c, "--broadcast does not combine with --retry-every/--exec: a broadcasting member's failures are not sent back")
	}
	cfg.MaxReconsumeTimes = int32(c.Int("max-reconsume"))
	if l := c.Int("retry-delay-level"); l < 0 || l > len(mq.DelayLevels) {
		return usageError(c, "--retry-delay-level %d: want 0..%d", l, len(mq.DelayLevels))
	}
	cfg.RetryDelayLevel = int32(c.Int("retry-delay-level"))
	cfg.Concurrency = 1 // one line at a time, in the order handled
	cfg.OnError = func(err error) { fmt.Fprintf(c.App.ErrWriter, "raftmq: %v\n", clean(err)) }
	ctx, cancel := opCtx(c)
	pc, err := cl.NewPushConsumer(ctx, cfg)
	cancel()
	if err != nil {
		return clean(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-c.Context.Done():
			break wait
		case <-limitHit:
			break wait
		case <-tick.C:
			mu.Lock()
			idle := time.Since(last)
			mu.Unlock()
			if !c.Bool("follow") && idle > c.Duration("idle") {
				break wait
			}
		}
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	return clean(pc.Close(cctx))
}

// runHandler runs cmd for one message; exit 0 is success.
func runHandler(ctx context.Context, cmd string, m *client.MessageExt) client.ConsumeResult {
	x := exec.CommandContext(ctx, "sh", "-c", cmd)
	x.Stdin = bytes.NewReader(m.Body)
	x.Stdout, x.Stderr = os.Stderr, os.Stderr
	x.Env = append(os.Environ(), "RAFTMQ_ID="+m.ID, "RAFTMQ_ORIGIN_ID="+m.OriginID, "RAFTMQ_TOPIC="+m.Topic,
		"RAFTMQ_RECONSUME_TIMES="+strconv.Itoa(int(m.ReconsumeTimes)), "RAFTMQ_KEY="+m.Key, "RAFTMQ_TAG="+m.Tag)
	if err := x.Run(); err != nil {
		return client.ConsumeRetryLater
	}
	return client.ConsumeSuccess
}
