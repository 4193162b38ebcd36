// Package raftlog owns the Raft log as the message store: opening the log,
// stable and snapshot stores (raft-wal or raft-boltdb/v2), the batch codec
// that packs many produce requests into one Raft entry, and reads of entries
// by index with this node's own retention floor.
//
// It must never interpret anything but batches: topics, offsets and dedupe
// belong to store/, and it never imports any other raftmq package.
package raftlog
