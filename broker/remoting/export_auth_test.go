package remoting

import (
	"github.com/raftmq/raftmq/broker/auth"
	rmq "github.com/raftmq/raftmq/remoting"
)

// AuthNeedsOf exposes authNeeds to the external tests.
func AuthNeedsOf(code int32, ext map[string]string, body []byte) []auth.Need {
	return authNeeds(&rmq.Command{Code: code, Ext: ext, Body: body})
}
