// Package raftlog owns the Raft log as the message store: opening the log,
// stable and snapshot stores (raft-wal or raft-boltdb/v2), the batch codec
// that packs many produce requests into one Raft entry, and reads of entries
// by index with this node's own retention floor.
//
// Every entry it reads from disk is checked against its checksum (the
// batch CRC, or the CRC framing of store's metadata commands: verify.go);
// a damaged entry is an ErrCorrupt error, reported once to
// Options.OnDamaged, never served or replicated. Before raft restores a
// snapshot, CheckSnapshots checks every one (snapshots.go): a damaged
// snapshot is moved aside only when an older one and the log still hold all
// it summarised, since raft would otherwise fall back and replay entries
// that are gone.
//
// It must never interpret anything but batches (of a metadata command it
// checks only the framing): topics, offsets and dedupe belong to store/, and
// it never imports any other raftmq package.
package raftlog
