// Package retention deletes old messages by whole log segments:
//
//   - The leader picks a cut: the first index of the oldest segment to keep
//     so that the log stays within Config.Bytes and holds nothing older
//     than Config.Age (by raft's append time of a segment's last entry).
//     The tail segment is always kept, and so is everything a healthy
//     follower has not applied yet.
//   - It replicates the cut as a store.Retain command: every node's FSM
//     moves each queue's minimum offset past the dropped messages, and
//     consumers below it continue at the new minimum (the broker's PullOffsetMoved).
//   - Every node then takes a snapshot covering the cut (raft sends it to a
//     follower that needs deleted entries) and deletes its log below it.
//
// A follower that installs such a snapshot drops its whole log; reads of
// bodies it no longer holds go to a node that has them.
//
// A Manager runs this on one node (Run, the broker's retention goroutine).
// It reads and cuts the log, replicates cuts and takes snapshots through the
// small interfaces it declares (Log, State, Writer, Snapshotter), and asks
// the broker (Hooks) whether it leads and what a cut must keep.
//
// It must never import the broker facade (github.com/raftmq/raftmq/broker)
// nor speak a wire protocol.
package retention
