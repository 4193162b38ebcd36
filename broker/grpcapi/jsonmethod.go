package grpcapi

import (
	"context"
	"encoding/json"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The hand-written services (Txn, Reply, Users) carry a JSON document in a
// BytesValue, so they need no generated code. jsonMethod and invokeJSON are
// their two ends.

// jsonMethod is a unary method named name (full name fullMethod) whose
// request is a JSON Req: it decodes it, refusing what does not decode as
// InvalidArgument naming what, and runs handle through the server's
// interceptors as a generated method runs.
func jsonMethod[Req any](name, fullMethod, what string, handle func(srv any, ctx context.Context, req Req) (any, error)) grpc.MethodDesc {
	return grpc.MethodDesc{MethodName: name, Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
		in := new(wrapperspb.BytesValue)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) {
			var r Req
			if err := json.Unmarshal(req.(*wrapperspb.BytesValue).Value, &r); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
			}
			return handle(srv, ctx, r)
		}
		if icpt == nil {
			return h(ctx, in)
		}
		return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: fullMethod}, h)
	}}
}

// invokeJSON calls method on cc with req as a JSON BytesValue, decoding the
// answer into out.
func invokeJSON(ctx context.Context, cc grpc.ClientConnInterface, method, what string, req any, out proto.Message) error {
	b, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return cc.Invoke(ctx, method, wrapperspb.Bytes(b), out)
}
