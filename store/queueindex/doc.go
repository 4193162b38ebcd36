// Package queueindex is a node's on-disk index of its queues, in the shape
// of RocketMQ's ConsumeQueue: per queue, one fixed-size record for every
// Raft entry that holds messages of the queue (the queue offset of its first
// message there and the entry's log index, both as distances from the
// file's first record, the message count or where the count and skip list
// are in the skip file, and a CRC32C): 16 bytes, in files of a fixed number
// of records named by their first record's offset and log index. Files of the earlier 28-byte format
// are removed when their queue opens, and the queue is indexed anew.
//
// The index is derived state: every node writes it as its state machine
// applies entries, and a restart replays the log from the last snapshot on.
// So records are written without fsync; Sync (called before a snapshot is
// persisted) makes every record up to the snapshot durable, and Truncate at
// restore drops what lies past it. A record is checked against its CRC when
// it is read, never all at once, so opening the index costs one small read
// per file, not a read of the index.
//
// A damaged queue is rebuilt beside itself: Scan reads every record
// position without trusting it, Check compares each file's size with what
// was written to it, OpenRebuild gives an empty queue in a directory of its
// own and Replace swaps its files in.
//
// Memory per queue is bounded: the last Options.Tail records (all the
// records not written yet among them) and one small entry per file. The
// caller serialises writers; readers may run alongside one another but not
// alongside a writer (the state machine's read/write lock does that).
package queueindex
