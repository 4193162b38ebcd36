package namesrv

import (
	"sort"
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
	Topics   map[string]int // topic -> queues
	// Perms holds a topic's RocketMQ permission (4 read, 2 write) when it
	// is not both (6).
	Perms map[string]int
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

func (r *registry) put(reg Registration) {
	reg.Seen = r.now()
	r.mu.Lock()
	r.regs[reg.Addr] = &reg
	r.mu.Unlock()
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
	Addrs   map[int64]string // brokerId -> address; 0 is the leader
	Nodes   map[int64]string // brokerId -> node id
	Term    uint64           // the leader's (or the highest registered) term
	Topics  map[string]int   // the topics of the registration that leads
	Perms   map[string]int   // their permissions when not 6
}

// groups builds every group's route from the live registrations.
func (r *registry) groups() map[string]*GroupRoute {
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
		gr := &GroupRoute{Cluster: regs[0].Cluster, Group: g, Addrs: map[int64]string{}, Nodes: map[int64]string{}, Term: regs[0].Term}
		for _, reg := range regs {
			if _, taken := gr.Addrs[reg.BrokerID]; taken {
				continue
			}
			gr.Addrs[reg.BrokerID] = reg.Addr
			gr.Nodes[reg.BrokerID] = reg.NodeID
			if reg.BrokerID == 0 && gr.Topics == nil {
				gr.Topics, gr.Perms, gr.Term = reg.Topics, reg.Perms, reg.Term
			}
		}
		if gr.Topics == nil {
			gr.Topics, gr.Perms = regs[0].Topics, regs[0].Perms // no leader registered: what the freshest member knows
		}
		out[g] = gr
	}
	return out
}

func (r *registry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expireLocked()
	return len(r.regs)
}
