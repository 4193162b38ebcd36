package remoting

import (
	"encoding/json"
	"fmt"

	"github.com/raftmq/raftmq/broker/filter"
	rmq "github.com/raftmq/raftmq/remoting"
)

// checkClientBody is CHECK_CLIENT_CONFIG's body (RocketMQ's
// CheckClientRequestBody), the parts read here.
type checkClientBody struct {
	ClientID         string `json:"clientId"`
	Group            string `json:"group"`
	SubscriptionData *struct {
		Topic          string `json:"topic"`
		SubString      string `json:"subString"`
		ExpressionType string `json:"expressionType"`
	} `json:"subscriptionData"`
}

// checkClientConfig answers CHECK_CLIENT_CONFIG, which the Java client sends
// before it starts a consumer with a SQL92 selector: SUCCESS when the
// subscription's expression compiles with the compiler pulls filter with
// (broker/filter), SUBSCRIPTION_PARSE_FAILED with the compiler's error when
// not, as RocketMQ's ClientManageProcessor.checkClientConfig does. RocketMQ
// accepts every TAG expression unchecked; here a tag expression that pulls
// would refuse ("a | b", "||") is refused now rather than on the first pull.
// No body or no subscription is SUCCESS (RocketMQ's too); a body that is
// not JSON is SYSTEM_ERROR, what RocketMQ's decoding exception becomes.
func (a *Adapter) checkClientConfig(req *rmq.Command) *rmq.Command {
	if len(req.Body) == 0 {
		return rmq.Response(req, rmq.Success, "")
	}
	var body checkClientBody
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return rmq.Response(req, rmq.SystemError, fmt.Sprintf("check client config: body: %v", err))
	}
	sub := body.SubscriptionData
	if sub == nil {
		return rmq.Response(req, rmq.Success, "")
	}
	if _, err := filter.Compile(sub.ExpressionType, sub.SubString); err != nil {
		a.log.Debug("client subscription refused", "client", body.ClientID, "group", body.Group, "topic", sub.Topic, "error", err)
		return rmq.Response(req, rmq.SubscriptionParseFailed, err.Error())
	}
	return rmq.Response(req, rmq.Success, "")
}
