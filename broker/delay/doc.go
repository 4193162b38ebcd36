// Package delay owns delayed and timed messages (docs/semantics.md): a
// produce request whose messages carry a delay level or a delivery time is
// stored at once, as an ordinary request, in the schedule topic
// (mq.ScheduleTopic): its queue there is the kind of wait
// (store/schedule.go), and the message keeps where it goes (REAL_TOPIC,
// REAL_QID, chosen now as for any message) and how long it waits (DELAY or
// TIMER_DELIVER_MS).
//
// It owns the checks of a delay at the edge (Parse, Check, Overhead), the
// staging of a request into the schedule topic (Stage, Acks), the
// Scheduler, which on the ready leader delivers due messages through the
// broker's batcher, and the lookup of a staged message by the id its ack
// named (Scheduler.Staged). The Scheduler reads the applied state and the
// schedule cursors through the interfaces it declares (State, Cursors,
// Log) and asks the broker (Hooks) to read a queue, submit a delivery and
// hand leadership over.
//
// It must never import the broker facade (github.com/raftmq/raftmq/broker)
// nor speak a wire protocol.
package delay
