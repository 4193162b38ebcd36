package remoting

import (
	"testing"

	"github.com/raftmq/raftmq/broker"
	rmq "github.com/raftmq/raftmq/remoting"
)

// TestCodesAreRocketMQs: the broker's table speaks the RocketMQ codes this
// package names.
func TestCodesAreRocketMQs(t *testing.T) {
	cases := map[error]int32{
		broker.ErrNotLeader:       rmq.ServiceNotAvailable,
		broker.ErrUnknownOutcome:  rmq.SystemError,
		broker.ErrInvalidArgument: rmq.MessageIllegal,
		broker.ErrNotFound:        rmq.TopicNotExist,
	}
	for err, want := range cases {
		if got := codeOf(err); got != want {
			t.Errorf("%v: %d, want %d", err, got, want)
		}
	}
}
