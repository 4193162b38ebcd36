package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/client"
)

// consumeOptions applies consume's filter and membership flags to cfg.
func consumeOptions(c *cli.Context, cfg *client.ConsumerConfig) error {
	cfg.Tags, cfg.SQL = c.String("tag"), c.String("sql")
	if c.IsSet("tag") && c.IsSet("sql") {
		return errors.New("consume: --tag and --sql cannot be combined (write the tag condition in SQL as TAGS = 'x')")
	}
	if c.Bool("broadcast") && cfg.Group == "" {
		return usageError(c, "--broadcast needs --group: a broadcasting member keeps its offsets under the group")
	}
	cfg.Broadcast = c.Bool("broadcast")
	cfg.MemberID = c.String("member")
	if cfg.MemberID == "" {
		host, _ := os.Hostname()
		cfg.MemberID = fmt.Sprintf("%s@%d", host, os.Getpid()) // RocketMQ's client id: stable for this process
	}
	if c.Bool("broadcast") && len(cfg.Queues) > 0 {
		return errors.New("consume: --broadcast reads every queue; it cannot be combined with --queue")
	}
	return nil
}

// startOffsets resolves consume --offset for every queue of ti (or only
// queues): start, end, N, +N (after the start) or -N (before the end), each
// kept within the queue's range.
func startOffsets(spec string, ti *api.TopicInfo, queues []int32) (map[int32]uint64, error) {
	pick := func(qi *api.QueueInfo) uint64 { return qi.MinOffset }
	switch {
	case spec == "start" || spec == "earliest":
	case spec == "end" || spec == "latest":
		pick = func(qi *api.QueueInfo) uint64 { return qi.MaxOffset }
	default:
		sign := spec[:min(1, len(spec))]
		digits := spec
		if sign == "+" || sign == "-" {
			digits = spec[1:]
		}
		n, err := strconv.ParseUint(digits, 10, 64)
		if err != nil || digits == "" {
			return nil, fmt.Errorf("--offset %q: want start, end, N, +N or -N", spec)
		}
		switch sign {
		case "+":
			pick = func(qi *api.QueueInfo) uint64 { return qi.MinOffset + min(n, qi.MaxOffset-qi.MinOffset) }
		case "-":
			pick = func(qi *api.QueueInfo) uint64 { return qi.MaxOffset - min(n, qi.MaxOffset-qi.MinOffset) }
		default:
			pick = func(qi *api.QueueInfo) uint64 { return min(max(n, qi.MinOffset), qi.MaxOffset) }
		}
	}
	want := map[int32]bool{}
	for _, q := range queues {
		if q < 0 || int(q) >= len(ti.QueueInfo) {
			return nil, fmt.Errorf("--queue %d: topic %s has queues 0..%d", q, ti.Name, len(ti.QueueInfo)-1)
		}
		want[q] = true
	}
	out := map[int32]uint64{}
	for _, qi := range ti.QueueInfo {
		if len(want) == 0 || want[qi.Queue] {
			out[qi.Queue] = pick(qi)
		}
	}
	return out, nil
}

func bodyFormatFlag() cli.Flag {
	return &cli.StringFlag{Name: "body-format", Value: "text", Usage: "how bodies are printed: text (as is), base64 or hex (binary bodies survive --format json)"}
}

// bodyEncoder is --body-format's encoding of a body for printing.
func bodyEncoder(c *cli.Context) (func([]byte) string, error) {
	switch f := c.String("body-format"); f {
	case "text":
		return func(b []byte) string { return string(b) }, nil
	case "base64":
		return base64.StdEncoding.EncodeToString, nil
	case "hex":
		return hex.EncodeToString, nil
	default:
		return nil, usageError(c, "--body-format %q: want text, base64 or hex", f)
	}
}

// jsonBody is a body as a JSON string and its encoding: as --body-format
// says, and base64 when it is text that is not valid UTF-8, which JSON
// cannot carry unmangled (body_encoding then says so).
func jsonBody(c *cli.Context, b []byte) (body, encoding string) {
	switch c.String("body-format") {
	case "base64":
		return base64.StdEncoding.EncodeToString(b), "base64"
	case "hex":
		return hex.EncodeToString(b), "hex"
	}
	if utf8.Valid(b) {
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

// bodyDecoder is produce --body-format's decoding of a given body.
func bodyDecoder(c *cli.Context) (func(string) ([]byte, error), error) {
	switch f := c.String("body-format"); f {
	case "text":
		return func(s string) ([]byte, error) { return []byte(s), nil }, nil
	case "base64":
		return func(s string) ([]byte, error) {
			b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("body is not base64: %w", err)
			}
			return b, nil
		}, nil
	case "hex":
		return func(s string) ([]byte, error) {
			b, err := hex.DecodeString(strings.TrimSpace(s))
			if err != nil {
				return nil, fmt.Errorf("body is not hex: %w", err)
			}
			return b, nil
		}, nil
	default:
		return nil, usageError(c, "--body-format %q: want text, base64 or hex", f)
	}
}

// splitOn is a bufio.SplitFunc for records ended by delim (the last one
// may lack it).
func splitOn(delim string) bufio.SplitFunc {
	d := []byte(delim)
	return func(data []byte, atEOF bool) (int, []byte, error) {
		if i := bytes.Index(data, d); i >= 0 {
			return i + len(d), data[:i], nil
		}
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	}
}

// parseWhen reads a time given after "@": RFC 3339, a negative duration
// before now ("-1h30m"), or unix milliseconds.
func parseWhen(spec string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, spec); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(spec); err == nil && d <= 0 {
		return now.Add(d), nil
	}
	if ms, err := strconv.ParseInt(spec, 10, 64); err == nil && ms >= 0 {
		return time.UnixMilli(ms), nil
	}
	return time.Time{}, fmt.Errorf("want a time: RFC 3339 (2026-12-04T10:00:00Z), a duration ago (-1h) or unix milliseconds")
}
