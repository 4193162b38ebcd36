package remoting

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// Frames sent by the real client decode here, and our answer decodes
// there: the producer asks a "name server" for a route and is told the
// topic does not exist.
func TestGoClientFrames(t *testing.T) {
	rlog.SetLogLevel("error")
	var mu sync.Mutex
	var got []*Command
	_, addr := startServer(t, func(ctx context.Context, c *Conn, req *Command) *Command {
		mu.Lock()
		got = append(got, req)
		mu.Unlock()
		return Response(req, TopicNotExist, "no route for "+req.Ext["topic"])
	})
	p, err := producer.NewDefaultProducer(producer.WithNameServer([]string{addr}), producer.WithRetry(0), producer.WithGroupName("capture"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, serr := p.SendSync(ctx, primitive.NewMessage("captured", []byte("x")))
	cancel()
	p.Shutdown()
	if serr == nil {
		t.Fatal("send succeeded without a route")
	}
	mu.Lock()
	defer mu.Unlock()
	var route *Command
	for _, c := range got {
		if c.Code == GetRouteInfoByTopic && c.Ext["topic"] == "captured" {
			route = c
		}
	}
	if route == nil {
		t.Fatalf("no GET_ROUTEINFO_BY_TOPIC for the topic among %d requests", len(got))
	}
	if route.Codec != JSON || route.Language != "GO" || route.Version != 317 || route.IsResponse() {
		t.Fatalf("request %+v", route)
	}
	if errors.Is(serr, context.DeadlineExceeded) {
		t.Fatalf("the client did not read our answer: %v", serr)
	}
}
