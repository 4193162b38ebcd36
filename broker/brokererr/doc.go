// Package brokererr holds the broker's sentinel errors, the kinds every
// wire protocol maps to its own codes. The facade re-exports them (broker.ErrX
// is brokererr.ErrX), so its subpackages return the same values without
// importing it.
//
// It is a leaf: it imports nothing of raftmq, never the broker facade
// (github.com/raftmq/raftmq/broker), and no wire protocol.
package brokererr
