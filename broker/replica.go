package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
	"github.com/raftmq/raftmq/store"
)

// The broker's view of its replica (the raft member and the state machine
// it applies), split by use. *store.Store implements Writer and State,
// *election.Node the rest; the broker's unit tests use a fake
// (fake_test.go).

// Writer replicates what the broker writes. Each call returns once the entry
// is committed and applied on this node, except Produce, which hands a batch
// to raft and returns a future so that the next batch forms meanwhile.
type Writer interface {
	Produce(reqs []*raftlog.Request, sizeHint int, timeout time.Duration) store.ProduceFuture
	// SetBatchVersion and BatchVersion: the highest batch version Produce
	// writes (batchversion.go sets it).
	SetBatchVersion(v raftlog.BatchVersion)
	BatchVersion() raftlog.BatchVersion
	CreateTopic(ctx context.Context, name string, queues int32, ifNotExists bool) (store.TopicInfo, error)
	CommitOffsets(ctx context.Context, group string, offsets []store.OffsetEntry) error
	RegisterNode(ctx context.Context, n store.NodeInfo) error
	ForgetNode(ctx context.Context, id string) error
	Retain(ctx context.Context, below uint64) error
	// Topic and group lifecycle (lifecycle.go).
	UpdateTopic(ctx context.Context, name string, perm uint32) (store.TopicInfo, error)
	DeleteTopic(ctx context.Context, name string) error
	DeleteGroup(ctx context.Context, group string, topics []string) error
	SetMaxReconsumeTimes(ctx context.Context, group string, max int32) error
	// SetGroupID names the group once (groupid.go).
	SetGroupID(ctx context.Context, id string) error
	// NumberProducer hands out the group's next producer number.
	NumberProducer(ctx context.Context) (uint64, error)
	// Orderly-consumption locks (locks.go).
	LockQueues(ctx context.Context, group, member string, queues []store.QueueRef, now time.Time, lease time.Duration) ([]store.QueueRef, error)
	UnlockQueues(ctx context.Context, group, member string, queues []store.QueueRef, now time.Time) error
}

// State reads what this node has applied.
type State interface {
	Applied() uint64
	// Changed is closed at the next apply (long polls wait on it).
	Changed() <-chan struct{}
	Damaged() (uint64, error)
	LogFloor() uint64
	Locate(topic string, q int32, offset uint64, limit int) ([]store.Location, store.QueueRange, error)
	Topic(name string) (store.TopicInfo, error)
	Topics() []store.TopicInfo
	QueueCount(topic string) int
	Offsets(group, topic string) map[int32]uint64
	Groups() []string
	GroupTopics(group string) []string
	Node(id string) (store.NodeInfo, bool)
	// LocateEntry is the index record of one entry in one queue (package lookup).
	LocateEntry(topic string, q int32, logIndex uint64) (store.Location, bool)
	// MaxReconsumeTimes and SettingsGroups serve retry (retry.go).
	MaxReconsumeTimes(group string) (int32, bool)
	SettingsGroups() []string
	// GroupID is the group's id ("" until set).
	GroupID() string
	// IndexRebuilds counts the queue indexes this node rebuilt from its
	// log and the damaged ranges it left to peers (metrics).
	IndexRebuilds() (rebuilt, refused uint64)
}

// Leadership is this node's role and leader as raft knows them.
type Leadership interface {
	Role() election.Role
	// Ready: a leader whose barrier applied every earlier entry.
	Ready() bool
	LeaderID() string
	Stats() election.Stats
	// OnChange registers a function called at every role or leader
	// change; remove unregisters it.
	OnChange(fn func(election.Event)) (remove func())
	NeverCampaign()
	CampaignWhen(ok func() bool)
}

// Membership reads and changes the group's configuration.
type Membership interface {
	Servers() ([]election.Server, error)
	Transfer(id string) error
	Reachable(ctx context.Context, id, addr string) error
	// CheckJoiner refuses a node that holds a log of its own
	// (election.ErrOwnLog) or does not answer raft calls
	// (election.ErrNoAnswer).
	CheckJoiner(ctx context.Context, id, addr string) error
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
	// Schedule, when set, lets the node take delayed messages (package delay).
	Schedule ScheduleState
}

var (
	_ Writer      = (*store.Store)(nil)
	_ State       = (*store.Store)(nil)
	_ Leadership  = (*election.Node)(nil)
	_ Membership  = (*election.Node)(nil)
	_ Snapshotter = (*election.Node)(nil)
)

// ReplicaOf is the Replica that s (the state, typed writes and schedule
// cursors) and n (its raft node: role, membership, snapshots) serve
// entirely.
func ReplicaOf(s *store.Store, n *election.Node) Replica {
	return Replica{Writer: s, State: s, Leadership: n, Membership: n, Snapshots: n, Schedule: s}
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

// replicaErr maps the sentinels of store (which include election's for
// writes) and election (membership) to the broker's, keeping the original
// error in the chain. With storeErr it is the only place that knows them.
func (b *Broker) replicaErr(err error) error {
	if errors.Is(err, store.ErrNotLeader) {
		return b.notLeader()
	}
	return storeErr(err)
}

// storeErr is replicaErr for every sentinel but not-leader, whose
// translation names this node's leader: it also serves the checks that
// run before any call (store.ValidateName, ValidatePerm, ValidateMember).
func storeErr(err error) error {
	var to error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrShutdown):
		return ErrShutdown
	case errors.Is(err, store.ErrUnknownOutcome), errors.Is(err, store.ErrDamaged):
		// ErrDamaged: committed on the group; this node just did not apply it.
		to = ErrUnknownOutcome
	case errors.Is(err, store.ErrTimeout):
		to = ErrTimeout
	case errors.Is(err, store.ErrIndexDamaged):
		to = ErrUnavailable
	case errors.Is(err, store.ErrTooLarge):
		to = ErrTooLarge
	case errors.Is(err, election.ErrNoSuchServer), errors.Is(err, store.ErrUnknownTopic), errors.Is(err, store.ErrUnknownUser):
		to = ErrNotFound
	case errors.Is(err, election.ErrRefused), errors.Is(err, election.ErrOwnLog), errors.Is(err, election.ErrNoAnswer):
		to = ErrFailedPrecondition
	case errors.Is(err, store.ErrTopicExists), errors.Is(err, store.ErrUserExists):
		to = ErrAlreadyExists
	case errors.Is(err, store.ErrStaleSequence):
		// This request was not appended. An earlier request with the same
		// sequence may have been stored, too long ago for its answer to be
		// remembered; the SDK never retries that far back (seqSpan).
		return fmt.Errorf("%w: refused, this request was not appended: %w", ErrFailedPrecondition, err)
	case errors.Is(err, store.ErrSequenceReused), errors.Is(err, store.ErrMismatchedRetry):
		to = ErrSequenceReused
	case errors.Is(err, store.ErrInvalidName), errors.Is(err, store.ErrInvalidQueue), errors.Is(err, store.ErrInvalidPerm):
		to = ErrInvalidArgument
	default:
		return err
	}
	return fmt.Errorf("%w: %w", to, err)
}
