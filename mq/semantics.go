package mq

import (
	"fmt"
	"strings"
	"time"
)

// RocketMQ's names for its message semantics, shared by the broker, the SDK
// and the remoting adapter (docs/semantics.md).

// Transactions (docs/semantics.md, "Transactions"): RocketMQ's system
// topics and the properties a half message carries.
const (
	// TxnHalfTopic holds half messages until their producer decides them.
	TxnHalfTopic = "RMQ_SYS_TRANS_HALF_TOPIC"
	// TxnDiscardTopic receives half messages the check-back gave up on.
	TxnDiscardTopic = "TRANS_CHECK_MAX_TIME_TOPIC"
	// PropProducerGroup is the sending producer's group (PGROUP).
	PropProducerGroup = "PGROUP"
	// PropTxnCheckImmunity: seconds before the first check-back of a half
	// message (CHECK_IMMUNITY_TIME_IN_SECONDS).
	PropTxnCheckImmunity = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	// PropTxnCheckTimes is the number of check-backs a discarded half
	// message had (TRANSACTION_CHECK_TIMES).
	PropTxnCheckTimes = "TRANSACTION_CHECK_TIMES"
	// PropTransactionID is the transaction id RocketMQ sets on a half
	// message: its UNIQ_KEY.
	PropTransactionID = "__transactionId__"
)

// IsTransactionPrepared reports whether properties mark a transactional half
// message (RocketMQ reads the property with Boolean.parseBoolean).
func IsTransactionPrepared(props map[string]string) bool {
	return strings.EqualFold(props[PropTransactionPrepared], "true")
}

// Message properties the broker writes on retry, dead-letter and delayed copies.
const (
	PropDelay             = "DELAY"
	PropTimerDeliverMS    = "TIMER_DELIVER_MS"
	PropRealTopic         = "REAL_TOPIC"
	PropRealQueue         = "REAL_QID"
	PropRetryTopic        = "RETRY_TOPIC"
	PropOriginMessageID   = "ORIGIN_MESSAGE_ID"
	PropReconsumeTime     = "RECONSUME_TIME"
	PropMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	PropDeadLetterReason  = "DLQ_REASON"
	// PropOriginQueue and PropOriginOffset: the queue and queue offset of
	// the first stored copy a retry or dead-letter copy stands for (raftmq's;
	// RocketMQ keeps them only in the message id).
	PropOriginQueue  = "ORIGIN_QUEUE_ID"
	PropOriginOffset = "ORIGIN_QUEUE_OFFSET"
	// PropTransactionPrepared ("true") marks a transactional half message,
	// held in TxnHalfTopic until its producer commits it.
	PropTransactionPrepared = "TRAN_MSG"
	retryPrefix             = "%RETRY%"
	deadLetterPrefix        = "%DLQ%"
	ScheduleTopic           = "SCHEDULE_TOPIC_XXXX"
	DefaultMaxReconsume     = 16
	MaxMaxReconsumeTimes    = 64
	DefaultMaxDelay         = 72 * time.Hour
)

// DelayLevels are RocketMQ's 18 delay levels; level n waits DelayLevels[n-1].
var DelayLevels = [...]time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// LevelDelay is how long delay level n (1..18) waits.
func LevelDelay(n int) (time.Duration, error) {
	if n < 1 || n > len(DelayLevels) {
		return 0, fmt.Errorf("delay level %d is not one of 1..%d (1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h)", n, len(DelayLevels))
	}
	return DelayLevels[n-1], nil
}

// RetryTopic is the topic a group's sent-back messages wait in.
func RetryTopic(group string) string { return retryPrefix + group }

// DeadLetterTopic is the topic of a group's dead letters.
func DeadLetterTopic(group string) string { return deadLetterPrefix + group }

// IsRetryTopic reports whether topic is some group's retry topic.
func IsRetryTopic(topic string) bool { return strings.HasPrefix(topic, retryPrefix) }

// IsDeadLetterTopic reports whether topic is some group's dead-letter topic.
func IsDeadLetterTopic(topic string) bool { return strings.HasPrefix(topic, deadLetterPrefix) }

// IsSystemTopic reports whether the broker owns topic (retry, dead-letter,
// schedule, transaction half and discard): users do not create, delete or produce to it directly.
func IsSystemTopic(topic string) bool {
	return IsRetryTopic(topic) || IsDeadLetterTopic(topic) || topic == ScheduleTopic || topic == TxnHalfTopic || topic == TxnDiscardTopic
}

// Properties of delayed and timed messages beyond RocketMQ's
// (docs/semantics.md, "Delayed and timed messages").
const (
	// PropStagedID is on every delivered copy of a delayed message: the id
	// its produce ack named (the staged message's id).
	PropStagedID = "STAGED_ID"
	// PropSchedulePopMS is on a timed message the broker staged again:
	// when it leaves its schedule queue (unix ms). Internal; cleared at
	// delivery.
	PropSchedulePopMS = "SCHEDULE_POP_MS"
)
