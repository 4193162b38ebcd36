package api

// A status error of the Broker service may carry a
// google.rpc.ErrorInfo detail with ErrorDomain and one of these reasons when
// the gRPC code alone does not tell a client what to do.
const (
	ErrorDomain = "raftmq"
	// ReasonSequenceReused (code InvalidArgument): the producer id and
	// sequence were already used by a request with other content. Nothing of
	// the request was stored; resending it under that sequence fails again.
	ReasonSequenceReused = "SEQUENCE_REUSED"
)
