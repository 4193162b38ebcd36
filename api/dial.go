package api

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// MaxMessageSize bounds one gRPC message on both sides: a produce request of
// several maximum-size messages, or a pull of up to 64 MiB.
const MaxMessageSize = 80 << 20

// Keepalive pings a connection that has calls in flight and has been silent
// for KeepaliveTime, and closes it when the ping is not answered within
// KeepaliveTimeout: a node that accepts the connection but stopped answering
// (paused, partitioned) fails the calls queued on it with Unavailable and is
// dialed afresh. 10 s is the least grpc-go allows. Without calls in flight
// nothing is pinged, so the servers' default enforcement (a ping more often
// than every 5 minutes counts only when the server sent nothing since the
// last one) never closes a healthy connection.
const (
	KeepaliveTime    = 10 * time.Second
	KeepaliveTimeout = 2 * time.Second
)

// Dial returns a lazily connecting client connection to a raftmq node, as
// both the Go SDK and the nodes themselves use it. It reconnects to a
// restarted node within a second, not grpc's default of up to two minutes.
// It is plaintext unless extra brings transport credentials or a dialer
// (TLS: grpc.WithTransportCredentials(credentials.NewTLS(cfg))); extra
// options apply after these.
func Dial(addr string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond,
			Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}, MinConnectTimeout: 2 * time.Second}),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize))}
	return grpc.NewClient(addr, append(opts, extra...)...)
}
