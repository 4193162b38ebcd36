package store

import (
	"errors"
	"fmt"

	"github.com/raftmq/raftmq/election"
)

// Errors of this package: every error a call returns wraps one of them (or
// is a plain validation message). The first four are election's, which
// translates raft's errors; callers never see a raft type.
var (
	// ErrNotLeader is election.ErrNotLeader: this node is not the leader (or
	// is handing leadership over); nothing was appended.
	ErrNotLeader = election.ErrNotLeader
	// ErrUnknownOutcome is election.ErrUnknownOutcome: leadership was lost
	// while the command was in flight; it may or may not be committed. Retry
	// with the same producer id and sequence.
	ErrUnknownOutcome = election.ErrUnknownOutcome
	// ErrTimeout is election.ErrTimeout: the command was not accepted in
	// time; nothing was appended.
	ErrTimeout = election.ErrTimeout
	// ErrShutdown is election.ErrShutdown: the node is shutting down.
	ErrShutdown = election.ErrShutdown
	// ErrTooLarge: the command would be a Raft entry larger than the log
	// store reads back (raftlog.MaxEntryBytes); it was refused, never
	// written.
	ErrTooLarge = errors.New("entry too large")

	// ErrUnknownUser: no user of that name has been applied here.
	ErrUnknownUser = errors.New("unknown user")
	// ErrUserExists: a user of that name exists.
	ErrUserExists = errors.New("user exists")
	// ErrUnknownTopic: no topic of that name has been applied here.
	ErrUnknownTopic = errors.New("unknown topic")
	// ErrTopicExists: the topic exists with another queue count (or the
	// create did not allow an existing topic).
	ErrTopicExists = errors.New("topic exists")
	// ErrInvalidName: a topic or group name that ValidateName refuses.
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidQueue: a queue number or count out of range.
	ErrInvalidQueue = errors.New("invalid queue")
	// ErrInvalidPerm: a topic permission other than 2, 4 or 6.
	ErrInvalidPerm = errors.New("invalid topic permission")
	// ErrStaleSequence: the producer's sequence is below its dedupe window;
	// the request was not appended.
	ErrStaleSequence = errors.New("producer sequence is older than the dedupe window")
	// ErrCorruptCommand: bytes that do not decode as a raftmq command.
	ErrCorruptCommand = errors.New("corrupt command")
	// ErrDamaged: this node met a damaged committed entry and stopped
	// applying; it holds no state at or after that entry. The entry is
	// committed on the group, so a producer retries it (same producer id
	// and sequence) on a healthy leader.
	ErrDamaged = errors.New("this node stopped applying at a damaged log entry")
	// ErrIndexDamaged: this node's queue index (queueindex, on its disk)
	// could not be read where a lookup needed it; the other nodes hold
	// their own.
	ErrIndexDamaged = errors.New("this node's queue index is damaged")
	// ErrIndexRebuilding wraps ErrIndexDamaged: the queue's index was
	// found damaged here and is being rebuilt from the log; until it is,
	// this node serves nothing of the queue.
	ErrIndexRebuilding = fmt.Errorf("%w: it is being rebuilt from the log", ErrIndexDamaged)
	// ErrSequenceReused: a request came with a (producer id, sequence)
	// that a request with other content (another digest or message count)
	// already used. Nothing of it is stored and the remembered result stays.
	ErrSequenceReused = errors.New("producer sequence already used by another request")
	// ErrMismatchedRetry: the queues of a retry are not those of the
	// request appended under its producer id and sequence, so some ack
	// would name an offset that holds another message. The state machine
	// refuses such a retry itself (ErrSequenceReused); this is the last
	// check before an ack leaves.
	ErrMismatchedRetry = errors.New("retry does not match the request appended under its producer id and sequence")
)
