// Package history is the one checker of "nothing acknowledged lost,
// nothing duplicated, order kept" that every test driving a real group
// uses: the chaos suite, the process and compose tests in integration, the
// in-process failover tests and `raftmq demo`.
//
// A History holds what clients were told (Op: the messages of a produce
// request, its outcome, OK with one Ack of queue, offset and id per
// message, Fail for a definite refusal, Unknown for anything else) and what
// was read back afterwards (Final: every queue's log in offset order;
// optionally each node's log, the messages found on disk at every
// acknowledged id, deliveries during the run). Check derives what must be
// there from the acks alone and trusts nothing the broker says about it:
// every acknowledged message is read back and compared field by field
// (body hash, key, tag, properties, queue, offset, id); offsets are dense;
// nothing appears twice, nothing unsent appears, nothing of a refused
// request appears; per producer and key the acknowledged messages keep
// their order. With retention only messages of log entries below the last
// announced cut (History.Cut) may be gone, whatever minimum the broker
// reports. Report counts and describes each broken promise by kind.
//
// Record builds the History of a simpler test: one message per request,
// acknowledged, failed or of unknown outcome, and the records a consumer
// read back.
//
// It never talks to a broker: callers read and fill in, Check judges.
package history
