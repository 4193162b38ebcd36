package grpcapi

import (
	"context"

	"google.golang.org/grpc/metadata"
)

// ForwardedContext marks an outgoing call as forwarded by node self: the
// node that receives it answers it itself and never forwards it again. The
// remoting adapter forwards through it as this package's server does.
func ForwardedContext(ctx context.Context, self string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, forwardedKey, self)
}
