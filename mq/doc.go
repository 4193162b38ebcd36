// Package mq is the vocabulary that raftmq's parts share, in RocketMQ's
// names: delay levels and limits, message property names, the broker's
// system topics (schedule, retry, dead-letter) and the roles a status
// report gives a node. The broker core, the SDK and every protocol adapter
// speak it, so the core needs no wire package to name them.
//
// It holds plain Go constants and functions only: it must never import
// generated code (api) or any other raftmq package.
package mq
