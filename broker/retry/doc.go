// Package retry owns the rules of consume-retry and dead letters
// (RocketMQ's CONSUMER_SEND_MSG_BACK): a consumer that cannot process a
// message sends it back by id; the leader reads the message and stores a copy, through Produce, in the group's retry
// topic %RETRY%<group> with a delay level of 3 + its reconsume count, or in
// %DLQ%<group> once the count passes the group's max reconsume times. Both
// topics (one queue each) are created on demand through the replicated
// CreateTopic. Every decision is the copy's content, so it is replicated
// with it: a new leader knows every copy the old one stored.
//
// A send-back is produced under a producer id of the group and the queue
// the message was read from (ProducerID), with the message's log
// position as sequence, so a SendBack retried after a timeout or a leader
// change (or the same message sent back by two members that both received
// it) stores one copy while the dedupe window (store.DedupeWindow
// sequences per producer id) still holds that sequence. A queue is consumed
// in order, so its sequences rise as its messages are sent back, and only a
// send-back more than a window behind the queue's others falls out: it is
// then stored without dedupe, and a retry of it may store a second copy. At
// least once, never lost.
//
// A client may store a retry itself by producing to %RETRY%<group> (the
// RocketMQ Go client does when its send-back fails: sendMessageBackAsNormal,
// with RECONSUME_TIME already raised and DELAY = 3 + the old count). The
// broker then applies the dead-letter rule SendBack applies: a message whose
// RECONSUME_TIME passes the limit (its MAX_RECONSUME_TIMES when above 0,
// else the group's) goes to %DLQ%<group> instead. A copy SendBack stored
// itself never passes it (its count is at most the limit), so the rule
// never moves one twice.
//
// It builds copies (Build), their producer ids (ProducerID) and the
// properties of dead letters and resends, and applies the max-reconsume
// limits over the applied state (Policy). Storing a copy is the broker's.
// It must never import the broker facade (github.com/raftmq/raftmq/broker)
// nor speak a wire protocol.
package retry
