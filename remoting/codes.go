package remoting

import "strconv"

// Request codes (RocketMQ's RequestCode). A code is a Java int on the wire
// of the JSON header (RocketMQ 5.x's pop family is 200050 and up); the
// ROCKETMQ binary header carries 16 bits of it.
const (
	SendMessage                      int32 = 10
	PullMessage                      int32 = 11
	QueryMessage                     int32 = 12
	QueryConsumerOffset              int32 = 14
	UpdateConsumerOffset             int32 = 15
	UpdateAndCreateTopic             int32 = 17
	GetAllTopicConfig                int32 = 21
	UpdateBrokerConfig               int32 = 25
	GetBrokerConfig                  int32 = 26
	GetBrokerRuntimeInfo             int32 = 28
	SearchOffsetByTimestamp          int32 = 29
	GetMaxOffset                     int32 = 30
	GetMinOffset                     int32 = 31
	GetEarliestMsgStoreTime          int32 = 32
	ViewMessageByID                  int32 = 33
	HeartBeat                        int32 = 34
	UnregisterClient                 int32 = 35
	ConsumerSendMsgBack              int32 = 36
	EndTransaction                   int32 = 37
	GetConsumerListByGroup           int32 = 38
	CheckTransactionState            int32 = 39
	NotifyConsumerIdsChanged         int32 = 40
	LockBatchMQ                      int32 = 41
	UnlockBatchMQ                    int32 = 42
	CheckClientConfig                int32 = 46
	PutKVConfig                      int32 = 100
	GetKVConfig                      int32 = 101
	DeleteKVConfig                   int32 = 102
	RegisterBroker                   int32 = 103
	UnregisterBroker                 int32 = 104
	GetRouteInfoByTopic              int32 = 105
	GetBrokerClusterInfo             int32 = 106
	UpdateAndCreateSubscriptionGroup int32 = 200
	GetAllSubscriptionGroupConfig    int32 = 201
	GetTopicStatsInfo                int32 = 202
	GetConsumerConnectionList        int32 = 203
	GetProducerConnectionList        int32 = 204
	GetAllTopicListFromNS            int32 = 206
	DeleteSubscriptionGroup          int32 = 207
	GetConsumeStats                  int32 = 208
	DeleteTopicInBroker              int32 = 215
	DeleteTopicInNamesrv             int32 = 216
	ResetConsumerClientOffset        int32 = 220
	InvokeBrokerToResetOffset        int32 = 222
	GetTopicsByCluster               int32 = 224
	QueryTopicConsumeByWho           int32 = 300
	GetSystemTopicListFromNS         int32 = 304
	GetConsumerRunningInfo           int32 = 307
	UpdateNamesrvConfig              int32 = 318
	GetNamesrvConfig                 int32 = 319
	SendMessageV2                    int32 = 310
	SendBatchMessage                 int32 = 320
	SendReplyMessage                 int32 = 324
	SendReplyMessageV2               int32 = 325
	PushReplyMessageToClient         int32 = 326
	LitePullMessage                  int32 = 361
	PopMessage                       int32 = 200050
)

// Response codes (RocketMQ's ResponseCode and RemotingSysResponseCode).
const (
	Success                 int32 = 0
	SystemError             int32 = 1
	SystemBusy              int32 = 2
	RequestCodeNotSupported int32 = 3
	MessageIllegal          int32 = 13
	ServiceNotAvailable     int32 = 14
	NoPermission            int32 = 16
	TopicNotExist           int32 = 17
	PullNotFound            int32 = 19
	PullRetryImmediately    int32 = 20
	PullOffsetMoved         int32 = 21
	QueryNotFound           int32 = 22
	SubscriptionParseFailed int32 = 23
)

// Flag bits of a command.
const (
	FlagResponse int32 = 1 << 0
	FlagOneway   int32 = 1 << 1
)

// Header codecs (the serialize type, the first byte of the header length).
const (
	JSON     byte = 0
	RocketMQ byte = 1
)

// CodeName is RocketMQ's name of a request code, or "" for a code RocketMQ
// does not define.
func CodeName(code int32) string { return requestCodeNames[code] }

// DescribeCode is a request code as remarks and logs print it: the number
// and, when RocketMQ defines it, its name.
func DescribeCode(code int32) string {
	if n := requestCodeNames[code]; n != "" {
		return strconv.Itoa(int(code)) + " (" + n + ")"
	}
	return strconv.Itoa(int(code))
}
