package store

// NodeInfo is a node's addresses as registered in the replicated state.
type NodeInfo struct {
	ID         string `json:"id"`
	ClientAddr string `json:"client_addr"`
	PeerAddr   string `json:"peer_addr"`
	HTTPAddr   string `json:"http_addr"`
	// ExternalAddr is the API address told to clients that connected
	// through the node's external listener; empty: it has none, and
	// ClientAddr serves everyone.
	ExternalAddr string `json:"external_addr,omitempty"`
}

// Node returns a registered node.
func (f *FSM) Node(id string) (NodeInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.nodes[id]
	return n, ok
}

// Nodes returns every registered node.
func (f *FSM) Nodes() map[string]NodeInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]NodeInfo, len(f.nodes))
	for k, v := range f.nodes {
		out[k] = v
	}
	return out
}
