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

// StreamWindow and ConnWindow are the fixed HTTP/2 flow-control windows of
// a stream and of a connection, on both sides (the nodes set them too).
// grpc-go's default dynamic windows make the receiver of a DATA frame send
// a PING whenever none is out, which the other side must wake up to
// answer: on a synchronous call, two more writes and wake-ups each way
// (about 10 % of a synchronous produce, docs/BENCHMARKS.md). Fixed windows
// send no such pings. 2 MiB per stream carries 40 MB/s at a 50 ms round
// trip and far more on a LAN; 16 MiB, the most grpc-go's dynamic windows
// grow to, bounds what one connection may have sent that nobody read yet.
const (
	StreamWindow = 2 << 20
	ConnWindow   = 16 << 20
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
		grpc.WithStaticStreamWindowSize(StreamWindow), grpc.WithStaticConnWindowSize(ConnWindow),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize))}
	return grpc.NewClient(addr, append(opts, extra...)...)
}
