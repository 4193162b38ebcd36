// Package keyindex is a node's on-disk index of message keys, in the shape of
// RocketMQ's IndexFile: fixed-size files of hash slots and linked 20-byte
// entries (key hash, log index, ordinal, previous entry of the slot). It
// answers candidates for a (topic, key) — hashes collide, so callers check
// each against the log — and holds only the current file's slot table in
// memory.
//
// The index is derived from the log on each node, never replicated: the
// caller adds the keys of every applied entry in log order (Add, then Done)
// and the index remembers how far it got. A file that was not closed cleanly
// is dropped at Open, with every later one, and indexed again from the log;
// a missing directory is an empty index that starts from the log's first
// entry. It owns no goroutine; one caller at a time writes, lookups may run
// alongside.
package keyindex
