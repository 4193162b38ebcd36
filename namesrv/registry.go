package namesrv

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Registration is what one broker node registered.
type Registration struct {
	Cluster  string
	Group    string // brokerName
	Addr     string // remoting address
	BrokerID int64  // 0: the leader
	NodeID   string
	Term     uint64
	// ClientAddr is the node's raftmq client API (gRPC) address, what the
	// raftmq SDK dials; "" for RocketMQ's own brokers.
	ClientAddr string
	// ExternalAddr and ExternalClientAddr are the remoting and client API
	// addresses for clients outside the node's network (published ports);
	// "" when the node has none: the external listener then hands out
	// Addr and ClientAddr.
	ExternalAddr       string
	ExternalClientAddr string
	// NoRemoting: the node serves no remoting port (Addr is its client
	// API address, only a key); it is in raftmq's routes, not RocketMQ's.
	NoRemoting bool
	// Members is the group's Raft membership as sorted "id@raftaddr"
	// entries: the group's identity. Two registrations of one brokerName
	// whose member sets share no entry come from two different groups.
	// Empty (RocketMQ's brokers) is not checked.
	Members []string
	Topics  map[string]int // topic -> queues
	// Perms holds a topic's RocketMQ permission (4 read, 2 write) when it
	// is not both (6).
	Perms map[string]int
	// WriteVia: this node, while a follower, takes sends for its group
	// (it forwards them to the leader) and is routed as a write-only
	// pseudo-broker too (broker/remoting's --remoting-write-via-followers).
	WriteVia bool
	// Live, when LiveKnown (a leader's registration): the followers the
	// leader heard from lately. Only their write paths are routed.
	Live      []string
	LiveKnown bool
	// Users are the group's users with sealed secrets (RegisterBody's
	// raftmqUsers), kept from registrations signed with the node
	// credential only.
	Users []User
	Seen  time.Time
}

// registry holds the live registrations, one per broker address.
type registry struct {
	mu     sync.Mutex
	expiry time.Duration
	regs   map[string]*Registration // by address
	now    func() time.Time
}

func newRegistry(expiry time.Duration) *registry {
	return &registry{expiry: expiry, regs: map[string]*Registration{}, now: time.Now}
}

// admit stores reg unless another live group holds its brokerName: one
// registered in another cluster, or one whose members share none with
// reg's. The error says which; nothing is stored then, so no route ever
// mixes two groups.
func (r *registry) admit(reg Registration) error {
	reg.Seen = r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked()
	if err := r.conflictLocked(&reg); err != nil {
		return err
	}
	r.regs[reg.Addr] = &reg
	return nil
}

// conflictLocked is the reason reg may not join its brokerName, or nil.
func (r *registry) conflictLocked(reg *Registration) error {
	var others []*Registration
	for _, o := range r.regs {
		if o.Group == reg.Group && o.Addr != reg.Addr {
			others = append(others, o)
		}
	}
	// In address order, so a refused node that retries is told (and the
	// name server logs) the same reason each time.
	sort.Slice(others, func(i, j int) bool { return others[i].Addr < others[j].Addr })
	for _, o := range others {
		if o.Cluster != reg.Cluster {
			return fmt.Errorf("%w: brokerName %s is registered in cluster %q (by %s); this node registers it in cluster %q",
				ErrNameTaken, reg.Group, o.Cluster, o.Addr, reg.Cluster)
		}
		if len(o.Members) > 0 && len(reg.Members) > 0 && !overlap(o.Members, reg.Members) {
			return fmt.Errorf("%w: brokerName %s is held by another group (members %s, registered by %s); this node's group has members %s",
				ErrNameTaken, reg.Group, strings.Join(o.Members, ","), o.Addr, strings.Join(reg.Members, ","))
		}
	}
	return nil
}

func overlap(a, b []string) bool {
	for _, m := range a {
		if slices.Contains(b, m) {
			return true
		}
	}
	return false
}

// sealed returns user's sealed secrets in the live registrations (one per
// distinct secret: the groups of a cluster may each have the user).
func (r *registry) sealed(user string) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	cut := r.now().Add(-r.expiry)
	var out [][]byte
	for _, reg := range r.regs {
		if reg.Seen.Before(cut) {
			continue
		}
		for _, u := range reg.Users {
			if u.Name == user && !slices.ContainsFunc(out, func(b []byte) bool { return string(b) == string(u.Sealed) }) {
				out = append(out, u.Sealed)
			}
		}
	}
	return out
}

func (r *registry) remove(addr string) {
	r.mu.Lock()
	delete(r.regs, addr)
	r.mu.Unlock()
}

// expireLocked drops registrations older than the expiry.
func (r *registry) expireLocked() {
	cut := r.now().Add(-r.expiry)
	for a, reg := range r.regs {
		if reg.Seen.Before(cut) {
			delete(r.regs, a)
		}
	}
}

// GroupRoute is one group as the routes show it.
type GroupRoute struct {
	Cluster string
	Group   string
	Addrs   map[int64]string // brokerId -> remoting address; 0 is the leader (nodes without remoting are left out)
	Nodes   map[int64]string // brokerId -> node id
	// ClientAddrs: brokerId -> the node's client API (gRPC) address, for
	// the members that registered one.
	ClientAddrs map[int64]string
	Term        uint64         // the leader's (or the highest registered) term
	Topics      map[string]int // the topics of the registration that leads
	Perms       map[string]int // their permissions when not 6
	// WritePaths are the followers (ids 1, 2, ... of Addrs) that take
	// sends for the group, by node id order; each is routed as a
	// write-only pseudo-broker (PseudoBrokerName).
	WritePaths []WritePath
}

// WritePath is a follower that takes the group's sends: the route names it
// as a brokerName of its own whose brokerAddrs hold only it, as id 0, so a
// producer that still holds a dead leader's address sends through the
// surviving followers without a route refresh.
type WritePath struct {
	Name   string // PseudoBrokerName(group, node)
	NodeID string
	Addr   string
}

// PseudoBrokerName is the brokerName a follower's write path is routed
// under: the group's name, "~", the node id.
func PseudoBrokerName(group, node string) string { return group + pseudoSep + node }

// pseudoSep separates a write path's group and node; the name server
// refuses a brokerName that contains it.
const pseudoSep = "~"

// groups builds every group's route from the live registrations, with
// the nodes' external addresses where they have them when external.
func (r *registry) groups(external bool) map[string]*GroupRoute {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked()
	byGroup := map[string][]*Registration{}
	for _, reg := range r.regs {
		byGroup[reg.Group] = append(byGroup[reg.Group], reg)
	}
	out := map[string]*GroupRoute{}
	for g, regs := range byGroup {
		// Highest term first; then the latest seen: that registration
		// holds its id.
		sort.Slice(regs, func(i, j int) bool {
			if regs[i].Term != regs[j].Term {
				return regs[i].Term > regs[j].Term
			}
			return regs[i].Seen.After(regs[j].Seen)
		})
		gr := &GroupRoute{Cluster: regs[0].Cluster, Group: g, Addrs: map[int64]string{}, Nodes: map[int64]string{},
			ClientAddrs: map[int64]string{}, Term: regs[0].Term}
		for _, reg := range regs {
			if _, taken := gr.Nodes[reg.BrokerID]; taken {
				continue
			}
			addr, client := reg.Addr, reg.ClientAddr
			if external && reg.ExternalAddr != "" {
				addr = reg.ExternalAddr
			}
			if external && reg.ExternalClientAddr != "" {
				client = reg.ExternalClientAddr
			}
			if !reg.NoRemoting {
				gr.Addrs[reg.BrokerID] = addr
			}
			gr.Nodes[reg.BrokerID] = reg.NodeID
			if client != "" {
				gr.ClientAddrs[reg.BrokerID] = client
			}
			if reg.BrokerID == 0 && gr.Topics == nil {
				gr.Topics, gr.Perms, gr.Term = reg.Topics, reg.Perms, reg.Term
			}
			// Only a registration that holds its id is a write path: a
			// shadowed one (a dead leader's, the old id of a node that
			// registered again) is not offered.
			if reg.BrokerID != 0 && reg.WriteVia && !reg.NoRemoting && reg.NodeID != "" && !hasPath(gr.WritePaths, reg.NodeID) {
				gr.WritePaths = append(gr.WritePaths, WritePath{Name: PseudoBrokerName(g, reg.NodeID), NodeID: reg.NodeID, Addr: addr})
			}
		}
		if lead := leading(regs); lead != nil && lead.LiveKnown {
			// The leader names the followers it hears from: a dead or
			// hung follower's registration lives until the expiry, its
			// write path only until the leader misses it.
			kept := gr.WritePaths[:0]
			for _, wp := range gr.WritePaths {
				if slices.Contains(lead.Live, wp.NodeID) {
					kept = append(kept, wp)
				}
			}
			gr.WritePaths = kept
		}
		if len(gr.WritePaths) == 0 {
			gr.WritePaths = nil
		}
		sort.Slice(gr.WritePaths, func(i, j int) bool { return gr.WritePaths[i].Name < gr.WritePaths[j].Name })
		if gr.Topics == nil {
			gr.Topics, gr.Perms = regs[0].Topics, regs[0].Perms // no leader registered: what the freshest member knows
		}
		out[g] = gr
	}
	return out
}

// leading is the registration that holds id 0 (regs sorted as groups
// sorts them), or nil.
func leading(regs []*Registration) *Registration {
	for _, reg := range regs {
		if reg.BrokerID == 0 {
			return reg
		}
	}
	return nil
}

func hasPath(paths []WritePath, node string) bool {
	for _, p := range paths {
		if p.NodeID == node {
			return true
		}
	}
	return false
}

func (r *registry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked()
	return len(r.regs)
}

// dropTopic removes topic from every live registration (of cluster, when
// not ""): the routes leave it out until a registration carries it again.
// A registration's maps are replaced, not changed: groups hands them out.
func (r *registry) dropTopic(topic, cluster string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, reg := range r.regs {
		if _, ok := reg.Topics[topic]; !ok || cluster != "" && reg.Cluster != cluster {
			continue
		}
		topics := make(map[string]int, len(reg.Topics))
		for t, n := range reg.Topics {
			if t != topic {
				topics[t] = n
			}
		}
		reg.Topics = topics
		if _, ok := reg.Perms[topic]; ok {
			perms := make(map[string]int, len(reg.Perms))
			for t, p := range reg.Perms {
				if t != topic {
					perms[t] = p
				}
			}
			reg.Perms = perms
		}
	}
}
