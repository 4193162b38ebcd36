package api

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// MaxMessageSize bounds one gRPC message on both sides: a produce request of
// several maximum-size messages, or a pull of up to 64 MiB.
const MaxMessageSize = 80 << 20

// Dial returns a lazily connecting client connection to a raftmq node, as
// both the Go SDK and the nodes themselves use it. It reconnects to a
// restarted node within a second, not grpc's default of up to two minutes.
func Dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond,
			Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}, MinConnectTimeout: 2 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)))
}
