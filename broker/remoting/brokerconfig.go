package remoting

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	rmq "github.com/raftmq/raftmq/remoting"
)

// brokerSettings is the node's configuration as GET_BROKER_CONFIG lists
// it: RocketMQ's BrokerConfig names where raftmq has the setting, and
// raftmq's own (prefixed raftmq) with the flag that sets them. Every one
// is set at start; none changes at run time.
func (a *Adapter) brokerSettings() map[string]string {
	bc := a.b.Config()
	id := "0"
	if v := a.reg.current(); v != nil {
		id = strconv.FormatInt(v.brokerID(v.self), 10)
	}
	return map[string]string{
		"brokerClusterName":          a.cfg.Cluster,
		"brokerName":                 bc.Group,
		"brokerId":                   id,
		"brokerIP1":                  hostOf(a.cfg.Addr),
		"listenPort":                 portOf(a.cfg.Addr),
		"namesrvAddr":                strings.Join(a.cfg.NameServers, ";"),
		"autoCreateTopicEnable":      strconv.FormatBool(bc.AutoCreateTopics),
		"defaultTopicQueueNums":      strconv.Itoa(bc.DefaultQueues),
		"maxMessageSize":             strconv.Itoa(bc.MaxMessageBytes),
		"registerNameServerPeriod":   strconv.FormatInt(a.cfg.RegisterPeriod.Milliseconds(), 10),
		"channelExpiredTimeout":      strconv.FormatInt(a.cfg.ConsumerExpiry.Milliseconds(), 10),
		"longPollingEnable":          "true",
		"transactionTimeOut":         strconv.FormatInt(a.cfg.TxnTimeout.Milliseconds(), 10),
		"transactionCheckInterval":   strconv.FormatInt(a.cfg.TxnCheckInterval.Milliseconds(), 10),
		"transactionCheckMax":        strconv.Itoa(a.cfg.TxnCheckMax),
		"fileReservedTime":           strconv.FormatInt(int64(bc.RetentionAge/time.Hour), 10),
		"raftmqNodeId":               bc.NodeID,
		"raftmqMaxPullWait":          a.cfg.MaxPullWait.String(),
		"raftmqWriteViaFollowers":    strconv.FormatBool(a.cfg.WriteViaFollowers),
		"raftmqReadsOnFollowers":     strconv.FormatBool(a.cfg.ReadsOnFollowers),
		"raftmqRetentionBytes":       strconv.FormatInt(bc.RetentionBytes, 10),
		"raftmqExternalRemotingAddr": a.cfg.ExternalAddr,
	}
}

// settingFlags names the flag that sets each setting GET_BROKER_CONFIG
// lists, for UPDATE_BROKER_CONFIG's refusal.
var settingFlags = map[string]string{
	"brokerClusterName":          "--cluster",
	"brokerName":                 "--broker-name",
	"listenPort":                 "--remoting",
	"brokerIP1":                  "--remoting",
	"namesrvAddr":                "--namesrv",
	"autoCreateTopicEnable":      "--auto-create-topics",
	"defaultTopicQueueNums":      "--default-queues",
	"maxMessageSize":             "--max-message-bytes",
	"registerNameServerPeriod":   "--register-period",
	"fileReservedTime":           "--retention",
	"raftmqRetentionBytes":       "--retention-mb",
	"raftmqWriteViaFollowers":    "--remoting-write-via-followers",
	"raftmqReadsOnFollowers":     "--remoting-reads-on-followers",
	"raftmqExternalRemotingAddr": "--remoting-advertise-external",
}

func hostOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return strings.Trim(addr[:i], "[]")
	}
	return addr
}

func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return ""
}

// encodeProperties writes settings as java.util.Properties text, sorted,
// as RocketMQ's MixAll.properties2String.
func encodeProperties(settings map[string]string) []byte {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, settings[k])
	}
	return b.Bytes()
}

// maxPropertiesBytes bounds an UPDATE_BROKER_CONFIG body.
const maxPropertiesBytes = 64 << 10

// decodeProperties reads java.util.Properties text (RocketMQ's
// MixAll.string2Properties; UPDATE_BROKER_CONFIG's body): key=value or
// key:value lines, '#' and '!' comments, blank lines skipped. Line
// continuations and escapes are not read (RocketMQ's tools send none).
func decodeProperties(body []byte) (map[string]string, error) {
	if len(body) > maxPropertiesBytes {
		return nil, fmt.Errorf("%d bytes of properties: at most %d", len(body), maxPropertiesBytes)
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 4096), maxPropertiesBytes+1)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i <= 0 {
			return nil, fmt.Errorf("line %d: %q is not key=value", n, line)
		}
		out[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// brokerConfig answers GET_BROKER_CONFIG (no header): the body is the
// node's settings as Properties text (brokerSettings), ext field version
// a DataVersion, as RocketMQ's AdminBrokerProcessor.getBrokerConfig.
func (a *Adapter) brokerConfig(req *rmq.Command) *rmq.Command {
	resp := rmq.Response(req, rmq.Success, "")
	resp.Body = encodeProperties(a.brokerSettings())
	v, _ := json.Marshal(dataVersion{Timestamp: time.Now().UnixMilli()})
	resp.Ext["version"] = string(v)
	return resp
}

// updateBrokerConfig answers UPDATE_BROKER_CONFIG (body Properties text):
// raftmq's settings are its flags, read at start, and none changes at run
// time, so each key is refused by name, with the flag that sets it where
// there is one.
func (a *Adapter) updateBrokerConfig(req *rmq.Command) *rmq.Command {
	props, err := decodeProperties(req.Body)
	if err != nil {
		return rmq.Response(req, rmq.SystemError, "update broker config: "+err.Error())
	}
	if len(props) == 0 {
		return rmq.Response(req, rmq.SystemError, "update broker config: no setting in the body")
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var why []string
	for _, k := range keys {
		if f, ok := settingFlags[k]; ok {
			why = append(why, fmt.Sprintf("%s is set by %s at start", k, f))
		} else {
			why = append(why, fmt.Sprintf("%s is not a raftmq setting", k))
		}
	}
	return rmq.Response(req, rmq.SystemError, "update broker config: raftmq changes no setting at run time: "+strings.Join(why, "; ")+
		"; set the flags and restart the nodes one at a time")
}
