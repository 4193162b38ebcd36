package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/replica"
)

// The broker's view of its replica (the raft member and the state machine
// it applies), split by use. *replica.Node implements all of them; the
// broker's unit tests use a fake (fake_test.go).

// Writer replicates what the broker writes. Each call returns once the entry
// is committed and applied on this node, except Produce, which hands a batch
// to raft and returns a future so that the next batch forms meanwhile.
type Writer interface {
	Produce(reqs []*raftlog.Request, sizeHint int, timeout time.Duration) replica.ProduceFuture
	CreateTopic(ctx context.Context, name string, queues int32, ifNotExists bool) (replica.TopicInfo, error)
	CommitOffsets(ctx context.Context, group string, offsets []replica.OffsetEntry) error
	RegisterNode(ctx context.Context, n replica.NodeInfo) error
	ForgetNode(ctx context.Context, id string) error
	Retain(ctx context.Context, below uint64) error
	// Topic and group lifecycle (lifecycle.go).
	UpdateTopic(ctx context.Context, name string, perm uint32) (replica.TopicInfo, error)
	DeleteTopic(ctx context.Context, name string) error
	DeleteGroup(ctx context.Context, group string, topics []string) error
	SetMaxReconsumeTimes(ctx context.Context, group string, max int32) error
	MarkLockTerm(ctx context.Context, term uint64) error
}

// State reads what this node has applied.
type State interface {
	Applied() uint64
	// Changed is closed at the next apply (long polls wait on it).
	Changed() <-chan struct{}
	Damaged() (uint64, error)
	LogFloor() uint64
	Locate(topic string, q int32, offset uint64, limit int) ([]replica.Location, replica.QueueRange, error)
	Topic(name string) (replica.TopicInfo, error)
	Topics() []replica.TopicInfo
	QueueCount(topic string) int
	Offsets(group, topic string) map[int32]uint64
	Groups() []string
	GroupTopics(group string) []string
	Node(id string) (replica.NodeInfo, bool)
	// LocateEntry is the index record of one entry in one queue (keys.go).
	LocateEntry(topic string, q int32, logIndex uint64) (replica.Location, bool)
	// MaxReconsumeTimes, SettingsGroups and LockTerm serve retry and
	// orderly locks (retry.go, locks.go).
	MaxReconsumeTimes(group string) (int32, bool)
	SettingsGroups() []string
	LockTerm() uint64
}

// Leadership is this node's role and leader as raft knows them.
type Leadership interface {
	Role() replica.Role
	// Ready: a leader whose barrier applied every earlier entry.
	Ready() bool
	LeaderID() string
	Stats() replica.Stats
	// OnChange registers a function called at every role or leader change.
	OnChange(fn func(replica.Event))
	NeverCampaign()
}

// Membership reads and changes the group's configuration.
type Membership interface {
	Servers() ([]replica.Server, error)
	Transfer(id string) error
	Reachable(ctx context.Context, id, addr string) error
	AddNonvoter(id, addr string) error
	Promote(id, addr string) error
	Remove(id string, force bool) error
}

// Snapshotter takes snapshots of the state machine (retention deletes the
// log only below what one covers).
type Snapshotter interface {
	Snapshot() (uint64, error)
	LastSnapshotIndex() uint64
}

// Replica is everything New needs from the replica.
type Replica struct {
	Writer     Writer
	State      State
	Leadership Leadership
	Membership Membership
	Snapshots  Snapshotter
	// Schedule, when set, lets the node take delayed messages (delay.go).
	Schedule ScheduleState
}

var (
	_ Writer      = (*replica.Node)(nil)
	_ State       = (*replica.Node)(nil)
	_ Leadership  = (*replica.Node)(nil)
	_ Membership  = (*replica.Node)(nil)
	_ Snapshotter = (*replica.Node)(nil)
)

// ReplicaOf is the Replica that n serves entirely.
func ReplicaOf(n *replica.Node) Replica {
	return Replica{Writer: n, State: n, Leadership: n, Membership: n, Snapshots: n, Schedule: n}
}

func (r *Replica) check() error {
	if r.Writer == nil || r.State == nil || r.Leadership == nil || r.Membership == nil || r.Snapshots == nil {
		return errors.New("replica: every part (writer, state, leadership, membership, snapshots) is required")
	}
	return nil
}

// node is the raft side the broker asks about roles, members and snapshots.
type node struct {
	Leadership
	Membership
	Snapshotter
}

// replicaErr maps replica's errors to the broker's, keeping replica's error
// in the chain. It is the only place that knows replica's sentinels.
func (b *Broker) replicaErr(err error) error {
	var to error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replica.ErrNotLeader):
		return b.notLeader()
	case errors.Is(err, replica.ErrShutdown):
		return ErrShutdown
	case errors.Is(err, replica.ErrUnknownOutcome), errors.Is(err, replica.ErrDamaged):
		// ErrDamaged: committed on the group; this node just did not apply it.
		to = ErrUnknownOutcome
	case errors.Is(err, replica.ErrTimeout):
		to = ErrTimeout
	case errors.Is(err, replica.ErrIndexDamaged):
		to = ErrUnavailable
	case errors.Is(err, replica.ErrTooLarge):
		to = ErrTooLarge
	case errors.Is(err, replica.ErrNoSuchServer), errors.Is(err, replica.ErrUnknownTopic):
		to = ErrNotFound
	case errors.Is(err, replica.ErrRefused):
		to = ErrFailedPrecondition
	case errors.Is(err, replica.ErrTopicExists):
		to = ErrAlreadyExists
	case errors.Is(err, replica.ErrStaleSequence):
		// This request was not appended. An earlier request with the same
		// sequence may have been stored, too long ago for its answer to be
		// remembered; the SDK never retries that far back (seqSpan).
		return fmt.Errorf("%w: refused, this request was not appended: %w", ErrFailedPrecondition, err)
	case errors.Is(err, replica.ErrSequenceReused), errors.Is(err, replica.ErrMismatchedRetry):
		to = ErrSequenceReused
	case errors.Is(err, replica.ErrInvalidName), errors.Is(err, replica.ErrInvalidQueue), errors.Is(err, replica.ErrInvalidPerm):
		to = ErrInvalidArgument
	default:
		return err
	}
	return fmt.Errorf("%w: %w", to, err)
}
