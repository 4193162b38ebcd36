package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/raftlog"
)

// numberWait bounds NumberProducer's wait for every member to say which
// batch versions it reads: a few rounds of the state loop. A node waits
// only in its first youngNode: later, a member that has never answered is
// down (or of another release), and the wait would only delay every new
// producer's first send.
const (
	numberWait = 2 * time.Second
	youngNode  = 10 * time.Second
)

// NumberProducer hands out the group's next producer number (the leader
// replicates it; store/producernumbers.go). A producer that sends "#<n>"
// as its id then costs two or three bytes of log per request. Only a
// group whose every member reads batch version 3 numbers producers: a
// member of an earlier release would not apply the command, and its
// counter, once it runs this release, would be behind the others' (two
// producers could get one number). While some member has not said yet
// what it reads and this node has just started (a group starting), it
// waits up to numberWait for them to.
func (b *Broker) NumberProducer(ctx context.Context) (uint64, error) {
	if err := b.awaitLeader(ctx); err != nil {
		return 0, err
	}
	wait := time.NewTimer(numberWait)
	defer wait.Stop()
	for v := b.w.BatchVersion(); v < raftlog.BatchV3; v = b.w.BatchVersion() {
		if !b.batchUnheard.Load() || time.Since(b.created) > youngNode {
			return 0, notNumbered(v)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-wait.C:
			return 0, notNumbered(v)
		case <-time.After(20 * time.Millisecond):
		}
	}
	n, err := b.w.NumberProducer(ctx)
	if err != nil {
		return 0, b.replicaErr(err)
	}
	return n, nil
}

// notNumbered is NumberProducer's refusal in a group that writes batch
// version v.
func notNumbered(v raftlog.BatchVersion) error {
	return fmt.Errorf("%w: producers are numbered once every member of the group runs a release that reads batch version 3 (the group writes version %d)", ErrFailedPrecondition, v)
}
