package remoting

import (
	"strings"
	"testing"

	"github.com/raftmq/raftmq/broker/auth"
	rmq "github.com/raftmq/raftmq/remoting"
)

// FuzzAuthNeeds: whatever a request's header and body hold, deciding what it
// needs never panics, names only topic and group resources (or the
// cluster, for admin codes), never the same need twice, and a retry topic
// is always its group's.
func FuzzAuthNeeds(f *testing.F) {
	f.Add(int32(rmq.HeartBeat), "cg", "orders", []byte(`{"clientID":"c","consumerDataSet":[{"groupName":"cg","subscriptionDataSet":[{"topic":"orders"},{"topic":"%RETRY%cg"}]}]}`))
	f.Add(int32(rmq.LockBatchMQ), "", "", []byte(`{"consumerGroup":"og","clientId":"c","mqSet":[{"topic":"t1","queueId":0}]}`))
	f.Add(int32(rmq.PullMessage), "cg", "%RETRY%cg", []byte(nil))
	f.Add(int32(rmq.SendMessageV2), "", "%RETRY%", []byte(nil))
	f.Add(int32(rmq.UpdateAndCreateTopic), "", "x", []byte("{"))
	f.Fuzz(func(t *testing.T, code int32, group, topic string, body []byte) {
		ext := map[string]string{"consumerGroup": group, "group": group, "topic": topic, "b": topic}
		needs := authNeeds(&rmq.Command{Code: code, Ext: ext, Body: body})
		seen := map[auth.Need]bool{}
		for _, n := range needs {
			if seen[n] {
				t.Fatalf("need %+v twice", n)
			}
			seen[n] = true
			switch {
			case n.Resource == auth.ClusterResource:
				if n.Action != auth.Admin {
					t.Fatalf("cluster need %+v", n)
				}
			case strings.HasPrefix(n.Resource, "topic:%RETRY%"):
				t.Fatalf("retry topic checked as a topic: %+v", n)
			case !strings.HasPrefix(n.Resource, "topic:") && !strings.HasPrefix(n.Resource, "group:"):
				t.Fatalf("resource %q", n.Resource)
			}
			if n.Action != auth.Publish && n.Action != auth.Subscribe && n.Action != auth.Admin {
				t.Fatalf("action %v", n.Action)
			}
		}
	})
}
