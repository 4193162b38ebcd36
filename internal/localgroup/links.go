package localgroup

import (
	"fmt"
	"sort"
	"strings"

	"github.com/raftmq/raftmq/internal/faultproxy"
)

func (g *Group) addProxies() error {
	g.proxies = map[string]map[string]*faultproxy.Proxy{}
	g.apiProxies = map[string]map[string]*faultproxy.Proxy{}
	g.clientProxy = map[string]*faultproxy.Proxy{}
	g.remotingProxy = map[string]*faultproxy.Proxy{}
	for _, n := range g.nodes {
		if g.cfg.Partitionable {
			cp, err := faultproxy.New(n.ID+" client", n.Listen)
			if err != nil {
				return err
			}
			g.clientProxy[n.ID] = cp
			n.Client = cp.Addr()
			if n.RemotingListen != "" {
				rp, err := faultproxy.New(n.ID+" remoting", n.RemotingListen)
				if err != nil {
					return err
				}
				g.remotingProxy[n.ID] = rp
				n.Remoting = rp.Addr()
			}
		}
		g.proxies[n.ID] = map[string]*faultproxy.Proxy{}
		g.apiProxies[n.ID] = map[string]*faultproxy.Proxy{}
		for _, m := range g.nodes {
			if m == n {
				continue
			}
			rp, err := faultproxy.New(n.ID+"->"+m.ID, m.Raft)
			if err != nil {
				return err
			}
			g.proxies[n.ID][m.ID] = rp
			if g.cfg.PeerLinks {
				ap, err := faultproxy.New(n.ID+"->"+m.ID+" api", m.Listen)
				if err != nil {
					return err
				}
				g.apiProxies[n.ID][m.ID] = ap
			}
		}
	}
	return nil
}

// raftDials is node id's --raft-dial value, "" without proxies.
func (g *Group) raftDials(id string) string {
	var ds []string
	for to, p := range g.proxies[id] {
		ds = append(ds, to+"="+p.Addr())
	}
	sort.Strings(ds)
	return strings.Join(ds, ",")
}

// peerDials is node id's --peer-dial value (PeerLinks): each peer's client
// address through the proxy of id's calls to it.
func (g *Group) peerDials(id string) string {
	var ds []string
	for to, p := range g.apiProxies[id] {
		ds = append(ds, g.Node(to).Listen+"="+p.Addr())
	}
	sort.Strings(ds)
	return strings.Join(ds, ",")
}

// Links returns the proxies that carry what node from sends to node to
// over the connections from opens: Raft, and with PeerLinks the
// node-to-node API. Nil without proxies or for a node that joined later.
func (g *Group) Links(from, to string) []*faultproxy.Proxy {
	var out []*faultproxy.Proxy
	if p := g.proxies[from][to]; p != nil {
		out = append(out, p)
	}
	if p := g.apiProxies[from][to]; p != nil {
		out = append(out, p)
	}
	return out
}

// Proxies returns every proxy of the group.
func (g *Group) Proxies() []*faultproxy.Proxy {
	var out []*faultproxy.Proxy
	for _, m := range []map[string]*faultproxy.Proxy{g.clientProxy, g.remotingProxy} {
		for _, p := range m {
			out = append(out, p)
		}
	}
	for _, m := range []map[string]map[string]*faultproxy.Proxy{g.proxies, g.apiProxies} {
		for _, ps := range m {
			for _, p := range ps {
				out = append(out, p)
			}
		}
	}
	return out
}

// Cut blackholes every link of node id (Config.Partitionable): Raft in both
// directions with every other node, every client API connection to it and
// every RocketMQ connection to it (Config.Remoting). Connections stay open;
// nothing passes until Heal. Its registrations with the name servers still
// pass (they do not go through a proxy).
func (g *Group) Cut(id string) error { return g.setCut(id, true) }

// Heal undoes Cut.
func (g *Group) Heal(id string) error { return g.setCut(id, false) }

func (g *Group) setCut(id string, on bool) error {
	n := g.Node(id)
	if n == nil {
		return fmt.Errorf("no node %s", id)
	}
	if g.clientProxy[id] == nil {
		return fmt.Errorf("%s has no proxies: the group was not made Partitionable, or %s joined later", id, id)
	}
	mode := faultproxy.Pass
	if on {
		mode = faultproxy.Blackhole
	}
	g.clientProxy[id].Set(mode, 0)
	if p := g.remotingProxy[id]; p != nil {
		p.Set(mode, 0)
	}
	for from, ps := range g.proxies {
		for to, p := range ps {
			if from == id || to == id {
				p.Set(mode, 0)
			}
		}
	}
	n.mu.Lock()
	n.cut = on
	n.mu.Unlock()
	return nil
}

// IsCut reports whether node id is cut off by Cut.
func (g *Group) IsCut(id string) bool {
	n := g.Node(id)
	if n == nil {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut
}
