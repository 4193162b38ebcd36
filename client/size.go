package client

import (
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/api"
)

// DefaultRequestLimit is the broker's default bound of one produce request
// (--max-request-bytes).
const DefaultRequestLimit = 16 << 20

// ErrRequestTooLarge: a Send whose messages, as the broker's log encodes
// them, exceed ProducerConfig.RequestLimit. Its messages are all-or-nothing,
// so the SDK cannot split it; the Send fails before anything is sent.
var ErrRequestTooLarge = errors.New("request too large")

// Widest varints of the broker's log encoding: a queue below 1024, a
// timestamp in milliseconds, a sequence or a count.
const (
	queueVarint = 2
	maxVarint   = 10
)

// messageSize bounds the bytes m takes in the broker's log (raftlog's batch
// encoding), which is what the broker's request bound counts.
func messageSize(m *Message) int {
	n := queueVarint + maxVarint + stringSize(len(m.Key)) + stringSize(len(m.Tag)) + maxVarint + stringSize(len(m.Body))
	for k, v := range m.Properties {
		n += stringSize(len(k)) + stringSize(len(v))
	}
	return n
}

// requestOverhead bounds the bytes of a request's own fields (producer id,
// sequence, topic, message count).
func requestOverhead(topic string) int {
	return stringSize(maxProducerIDLen) + maxVarint + stringSize(len(topic)) + maxVarint
}

// maxProducerIDLen bounds a producer id of the SDK: "#" and a uint64, or
// 11 random characters.
const maxProducerIDLen = 21

func stringSize(n int) int {
	s := 1
	for v := n; v >= 0x80; v >>= 7 {
		s++
	}
	return s + n
}

// explainSizeRefusal wraps gRPC's refusal of a message over its size limit,
// which a broker whose --max-request-bytes is below RequestLimit answers.
func explainSizeRefusal(err error, limit int) error {
	if !api.OverSizeLimit(err) {
		return err
	}
	return fmt.Errorf("send: %w: the broker reads smaller requests than ProducerConfig.RequestLimit (%d) allows; set it to the broker's --max-request-bytes: %w",
		ErrRequestTooLarge, limit, err)
}

func tooLarge(msgs, size, limit int) error {
	return fmt.Errorf("send: %w: %d message(s) encode to %d bytes, over the limit of %d bytes "+
		"(the broker's --max-request-bytes, ProducerConfig.RequestLimit); messages of one Send are never split, so send fewer or smaller ones",
		ErrRequestTooLarge, msgs, size, limit)
}
