package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"

	"github.com/raftmq/raftmq/raftlog"
)

// Metadata commands are rare and small, so they are JSON behind the
// raftlog.CmdMeta type byte and a CRC32C of the JSON. Produce batches use raftlog's binary codec.
const (
	opCreateTopic   = "create_topic"
	opCommitOffsets = "commit_offsets"
	opRegisterNode  = "register_node"
	opForgetNode    = "forget_node"
	opRetain        = "retain"
)

// OffsetEntry is one committed consumer offset.
type OffsetEntry struct {
	Topic  string `json:"topic"`
	Queue  int32  `json:"queue"`
	Offset uint64 `json:"offset"`
}

type metaCmd struct {
	Op          string        `json:"op"`
	Topic       string        `json:"topic,omitempty"`
	Queues      int32         `json:"queues,omitempty"`
	IfNotExists bool          `json:"if_not_exists,omitempty"`
	Group       string        `json:"group,omitempty"`
	Offsets     []OffsetEntry `json:"offsets,omitempty"`
	Node        *NodeInfo     `json:"node,omitempty"`
	Below       uint64        `json:"below,omitempty"`
	Perm        uint32        `json:"perm,omitempty"`   // update_topic
	Topics      []string      `json:"topics,omitempty"` // delete_group: the group's own topics
	// Mins: opRetain: the queues' new minimums (nil in a retain of an
	// older version: each node's index tells them).
	Mins *RetainMins `json:"mins,omitempty"`
	// MaxReconsume: opSetMaxReconsume (groupsettings.go).
	MaxReconsume *int32 `json:"max_reconsume,omitempty"`
	// Term: opLockTerm (locks.go).
	Term uint64 `json:"term,omitempty"`
	// Member, LockQueues, At (unix nanoseconds) and Lease (nanoseconds):
	// opLock and opUnlock (locks.go).
	Member     string     `json:"member,omitempty"`
	LockQueues []QueueRef `json:"lock_queues,omitempty"`
	At         int64      `json:"at,omitempty"`
	Lease      int64      `json:"lease,omitempty"`
	// User, Secret (sealed), Resource, Actions: the user table (users.go).
	User     string `json:"user,omitempty"`
	Secret   []byte `json:"secret,omitempty"`
	Resource string `json:"resource,omitempty"`
	Actions  uint32 `json:"actions,omitempty"`
	// GroupID: opSetGroupID (groupid.go).
	GroupID string `json:"group_id,omitempty"`
}

func encodeMeta(c *metaCmd) []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(fmt.Sprintf("encode %s command: %v", c.Op, err)) // only plain fields: cannot fail
	}
	out := make([]byte, raftlog.MetaHeaderLen, raftlog.MetaHeaderLen+len(b))
	out[0] = byte(raftlog.CmdMeta)
	binary.BigEndian.PutUint32(out[1:raftlog.MetaHeaderLen], crc32.Checksum(b, castagnoli))
	return append(out, b...)
}

func decodeMeta(data []byte) (*metaCmd, error) {
	if err := raftlog.CheckMeta(data); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCommand, err)
	}
	var c metaCmd
	if err := json.Unmarshal(data[raftlog.MetaHeaderLen:], &c); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorruptCommand, err)
	}
	if (c.Op == opRegisterNode || c.Op == opForgetNode) && c.Node == nil {
		return nil, fmt.Errorf("%w: %s without a node", ErrCorruptCommand, c.Op)
	}
	if (c.Op == opLock || c.Op == opUnlock) && c.Member == "" {
		return nil, fmt.Errorf("%w: %s without a member", ErrCorruptCommand, c.Op)
	}
	if c.Op == opLock && c.Lease <= 0 {
		return nil, fmt.Errorf("%w: lock with lease %d", ErrCorruptCommand, c.Lease)
	}
	if c.Mins != nil {
		for _, tm := range c.Mins.Topics {
			if len(tm.Mins) > MaxQueues {
				return nil, fmt.Errorf("%w: retain lists %d queues of topic %q, at most %d", ErrCorruptCommand, len(tm.Mins), tm.Topic, MaxQueues)
			}
		}
	}
	return &c, nil
}

// EncodeCreateTopic encodes a command that creates a topic.
func EncodeCreateTopic(name string, queues int32, ifNotExists bool) []byte {
	return encodeMeta(&metaCmd{Op: opCreateTopic, Topic: name, Queues: queues, IfNotExists: ifNotExists})
}

// EncodeCommitOffsets encodes a command that sets a group's offsets.
func EncodeCommitOffsets(group string, offsets []OffsetEntry) []byte {
	return encodeMeta(&metaCmd{Op: opCommitOffsets, Group: group, Offsets: offsets})
}

// EncodeRegisterNode encodes a command that records a node's addresses.
func EncodeRegisterNode(n NodeInfo) []byte {
	return encodeMeta(&metaCmd{Op: opRegisterNode, Node: &n})
}

// EncodeForgetNode encodes a command that drops a removed node's addresses.
func EncodeForgetNode(id string) []byte {
	return encodeMeta(&metaCmd{Op: opForgetNode, Node: &NodeInfo{ID: id}})
}

// EncodeRetain encodes a command that drops every message stored in a log entry
// below index below: each queue's minimum offset moves past them, and every
// node may then delete that part of its log (retention). Each node takes
// the minimums from its own index, as older versions did; Store.Retain
// writes EncodeRetainMins.
func EncodeRetain(below uint64) []byte {
	return encodeMeta(&metaCmd{Op: opRetain, Below: below})
}

// EncodeRetainMins encodes a retention cut below index below that moves
// the queues' minimums to mins (FSM.RetainMins) on every node alike.
func EncodeRetainMins(below uint64, mins *RetainMins) []byte {
	if mins == nil {
		mins = &RetainMins{}
	}
	return encodeMeta(&metaCmd{Op: opRetain, Below: below, Mins: mins})
}
