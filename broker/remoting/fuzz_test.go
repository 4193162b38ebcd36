package remoting

import (
	"strings"
	"testing"

	rmq "github.com/raftmq/raftmq/remoting"
)

// FuzzDecodeLockBatch: the body of LOCK_BATCH_MQ / UNLOCK_BATCH_MQ never
// panics, and a decoded body stays within the broker's bound.
func FuzzDecodeLockBatch(f *testing.F) {
	// As the Go client's jsoniter marshals lockBatchRequestBody.
	f.Add([]byte(`{"consumerGroup":"og","clientId":"10.0.0.1@123#456","mqSet":[{"topic":"ordered","brokerName":"raftmq","queueId":0},{"topic":"ordered","brokerName":"raftmq","queueId":1}]}`))
	f.Add([]byte(`{"consumerGroup":"og","clientId":"c","mqSet":null}`))
	f.Add([]byte(`{"mqSet":[{"queueId":-1}]}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := decodeLockBatch(body)
		if err != nil {
			return
		}
		if len(b.refs()) != len(b.MQSet) || len(b.MQSet) > 4096 {
			t.Fatalf("%d queues decoded, %d refs", len(b.MQSet), len(b.refs()))
		}
	})
}

// FuzzParseSendBack: any CONSUMER_SEND_MSG_BACK header decodes to an error
// or to a request the broker's bounds accept (level -1..18, limit 0..64, a
// well-formed message id).
func FuzzParseSendBack(f *testing.F) {
	f.Add("cg", "4294967296", "0", "16")
	f.Add("cg", "1", "-1", "-1")
	f.Add("cg", "9223372036854775807", "99", "1000")
	f.Add("", "x", "", "")
	f.Fuzz(func(t *testing.T, group, offset, level, maxTimes string) {
		req := &rmq.Command{Ext: map[string]string{"group": group, "offset": offset, "delayLevel": level, "maxReconsumeTimes": maxTimes}}
		h, err := parseSendBack(req)
		if err != nil {
			return
		}
		if h.delayLevel < -1 || h.delayLevel > 18 || h.maxTimes < 0 || h.maxTimes > 64 || len(h.id) != 24 || strings.Trim(h.id, "0123456789ABCDEF") != "" {
			t.Fatalf("header %v decoded to %+v", req.Ext, h)
		}
	})
}

// FuzzDecodeGroupConfig: any UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body
// decodes to an error or to a config with a group name and a retry count
// the broker accepts.
func FuzzDecodeGroupConfig(f *testing.F) {
	// As mqadmin updateSubGroup sends SubscriptionGroupConfig (fastjson).
	f.Add([]byte(`{"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"groupName":"cg","groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,"whichBrokerWhenConsumeSlowly":1}`))
	f.Add([]byte(`{"groupName":"cg","retryMaxTimes":-1}`))
	f.Add([]byte(`{"groupName":"cg","consumeEnable":false}`))
	f.Add([]byte(`{"groupName":1}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := decodeGroupConfig(body)
		if err != nil {
			return
		}
		if c.GroupName == "" || c.RetryMaxTimes != nil && (*c.RetryMaxTimes < 0 || *c.RetryMaxTimes > 64) {
			t.Fatalf("%q decoded to %+v", body, c)
		}
	})
}

func TestDecodeGroupConfigRefusesByName(t *testing.T) {
	for body, want := range map[string]string{
		``:                                      "no body: want a SubscriptionGroupConfig",
		`[`:                                     "body is not a SubscriptionGroupConfig",
		`{"retryMaxTimes":3}`:                   "groupName: empty",
		`{"groupName":"cg","retryMaxTimes":65}`: "retryMaxTimes 65: want 0..64",
		`{"groupName":"cg","consumeEnable":false}`:          "consumeEnable false: raftmq does not pause",
		`{"groupName":"cg","consumeBroadcastEnable":false}`: "consumeBroadcastEnable false",
		`{"groupName":"cg","retryMaxTimes":"x"}`:            "body is not a SubscriptionGroupConfig",
	} {
		_, err := decodeGroupConfig([]byte(body))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}
