package main

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
	"github.com/raftmq/raftmq/mq"
)

// The delay flags of produce: at most one of them.
var delayFlags = [...]cli.Flag{
	&cli.DurationFlag{Name: "delay", Usage: "deliver each message this long after it is sent (e.g. 90s, 10m), up to the server's --max-delay"},
	&cli.StringFlag{Name: "deliver-at", Usage: "deliver at this RFC 3339 time (e.g. 2026-01-02T15:04:05Z), up to the server's --max-delay ahead"},
	&cli.IntFlag{Name: "delay-level", Usage: "deliver after RocketMQ delay level N: 1..18 = 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"},
}

// delaySpec is what the delay flags ask for.
type delaySpec struct {
	level int
	delay time.Duration
	at    time.Time
}

func parseDelayFlags(c *cli.Context) (delaySpec, error) {
	var d delaySpec
	set := 0
	for _, n := range []string{"delay", "deliver-at", "delay-level"} {
		if c.IsSet(n) {
			set++
		}
	}
	if set > 1 {
		return d, fmt.Errorf("produce: --delay, --deliver-at and --delay-level exclude each other; give one")
	}
	switch {
	case c.IsSet("delay"):
		d.delay = c.Duration("delay")
		if d.delay <= 0 {
			return d, fmt.Errorf("--delay %s: want a positive duration such as 30s or 10m", d.delay)
		}
	case c.IsSet("deliver-at"):
		t, err := time.Parse(time.RFC3339, c.String("deliver-at"))
		if err != nil {
			return d, fmt.Errorf("--deliver-at %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z: %w", c.String("deliver-at"), err)
		}
		d.at = t
	case c.IsSet("delay-level"):
		d.level = c.Int("delay-level")
		if _, err := mq.LevelDelay(d.level); err != nil {
			return d, fmt.Errorf("--delay-level: %w", err)
		}
	}
	return d, nil
}

// apply sets a message's delay; --delay counts from now.
func (d delaySpec) apply(m *client.Message) {
	switch {
	case d.level != 0:
		m.DelayLevel = d.level
	case d.delay > 0:
		m.DeliverAt = time.Now().Add(d.delay)
	case !d.at.IsZero():
		m.DeliverAt = d.at
	}
}

// ackDeliverAt is a delayed message's delivery time in RFC 3339 ("" when
// the message was not delayed).
func ackDeliverAt(a *api.Ack) string {
	t := client.AckDeliverAt(a)
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}
