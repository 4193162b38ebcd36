package remoting

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/namesrv"
	rmq "github.com/raftmq/raftmq/remoting"
)

// view is the group as the route numbers it: the leader is brokerId 0, the
// other members 1, 2, ... in the order of their node ids. Every node
// computes it from the same membership and leader, so the id a node
// registers under and the id a pull response suggests for it agree.
type view struct {
	self   string
	leader string
	term   uint64
	ids    map[string]int64
	// live (the leader's view only): the followers it heard from within
	// liveGrace, sorted; the name server offers only their write paths,
	// so a follower that died (or hangs) stops being routed for sends
	// after liveGrace plus the clients' next route poll, not after the
	// name server's expiry of its registration.
	live     []string
	liveSeen bool
	// members is the group's identity for the name servers: its Raft
	// membership as sorted "id@raftaddr" (namesrv.ExtMembers).
	members []string
	// prevIDs is the numbering under the previous leader, which clients
	// keep until their next route poll (every 30 s): until graceUntil
	// pull responses suggest nodes by it (suggestID).
	prevIDs    map[string]int64
	graceUntil time.Time
}

// numberingGrace is how long after a leader change pull responses keep
// suggesting nodes by the previous leader's numbering: the clients' route
// poll (30 s) plus a margin.
const numberingGrace = 40 * time.Second

// suggestID is the brokerId a pull response suggests for node. Clients
// read it against the route they last polled, which for up to 30 s after
// a leader change numbers the group by the previous leader (its id 0 the
// old leader, dead when it was killed). Until graceUntil it is node's id
// in that numbering: a client with the old route finds node under it, and
// a client with the new route finds a live node (the old leader is no
// longer routed; a missing id falls back to id+1, then to any address),
// which serves or sends it on. Afterwards it is node's id now.
func (v *view) suggestID(node string) int64 {
	if v != nil && v.prevIDs != nil && time.Now().Before(v.graceUntil) {
		if id, ok := v.prevIDs[node]; ok {
			return id
		}
	}
	return v.brokerID(node)
}

// oldLeader reports whether node led before the last leader change and
// that change is within its grace: it may be dead.
func (v *view) oldLeader(node string) bool {
	if v == nil || v.prevIDs == nil || node == v.leader || !time.Now().Before(v.graceUntil) {
		return false
	}
	id, ok := v.prevIDs[node]
	return ok && id == 0
}

// retryID is the brokerId a "pull again" answer that names no node
// suggests: the leader's, or, with none known, this node's.
func (v *view) retryID() int64 {
	if v == nil {
		return 0
	}
	if v.leader != "" {
		return v.suggestID(v.leader)
	}
	return v.suggestID(v.self)
}

// liveGrace is how long the leader keeps counting a silent follower as a
// write path; well above the state period (a follower under load answers
// late), well below the name servers' expiry.
const liveGrace = 5 * time.Second

func (v *view) brokerID(node string) int64 {
	if v == nil {
		return 0
	}
	if id, ok := v.ids[node]; ok {
		return id
	}
	return 0
}

func (v *view) isLeader() bool { return v != nil && v.leader != "" && v.leader == v.self }

func (v *view) same(o *view) bool {
	if v == nil || o == nil || v.leader != o.leader || v.term != o.term || len(v.ids) != len(o.ids) || !slices.Equal(v.members, o.members) ||
		v.liveSeen != o.liveSeen || !slices.Equal(v.live, o.live) {
		return false
	}
	for k, id := range v.ids {
		if o.ids[k] != id {
			return false
		}
	}
	return true
}

func numbering(leader string, members []string) map[string]int64 {
	sort.Strings(members)
	ids := map[string]int64{}
	next := int64(1)
	for _, m := range members {
		if m == leader {
			ids[m] = 0
			continue
		}
		ids[m] = next
		next++
	}
	return ids
}

// registrar registers this node with every name server: every period, and
// at once when the view changes (a new leader, a member added or removed),
// so a route names a new leader within moments of its election.
type registrar struct {
	a    *Adapter
	cl   *rmq.Client
	v    atomic.Pointer[view]
	kick chan struct{}
	// last outcome per name server, to log changes only
	mu     sync.Mutex
	failed map[string]bool
	// the term this node last led and when it saw itself lead it (under
	// mu)
	leadTerm  uint64
	leadSince time.Time
	// the last leader known, its numbering, and the numbering before it
	// with the end of its grace (under mu)
	lastLeader string
	lastIDs    map[string]int64
	prevIDs    map[string]int64
	graceUntil time.Time
}

// viewPoll is how often the registrar compares the view (role changes also
// wake it through RoleChanged).
const viewPoll = 200 * time.Millisecond

func newRegistrar(a *Adapter) *registrar {
	r := &registrar{a: a, cl: rmq.NewClient(), kick: make(chan struct{}, 1), failed: map[string]bool{}}
	r.cl.DialTimeout = time.Second
	r.cl.Dial = a.cfg.NameServerDial
	return r
}

func (r *registrar) kickNow() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *registrar) current() *view {
	if v := r.v.Load(); v != nil {
		return v
	}
	return r.refresh()
}

func (r *registrar) refresh() *view {
	st, err := r.a.b.Status()
	if err != nil {
		return r.v.Load()
	}
	members := make([]string, 0, len(st.Nodes))
	identity := make([]string, 0, len(st.Nodes))
	for _, n := range st.Nodes {
		members = append(members, n.ID)
		identity = append(identity, n.ID+"@"+n.RaftAddr)
	}
	sort.Strings(identity)
	v := &view{self: r.a.b.ID(), leader: st.LeaderID, term: st.Term, ids: numbering(st.LeaderID, members), members: identity}
	if st.LeaderID != "" && st.LeaderID == v.self {
		now := time.Now()
		r.mu.Lock()
		if r.leadTerm != st.Term {
			r.leadTerm, r.leadSince = st.Term, now
		}
		since := r.leadSince
		r.mu.Unlock()
		v.live, v.liveSeen = liveFollowers(st, now, since), true
	}
	if prev := r.v.Load(); st.LeaderID == "" && prev != nil {
		// An election: the routes still number the members by the last
		// leader, so suggestions keep doing so until a new one is known.
		v.ids = prev.ids
	}
	r.mu.Lock()
	if st.LeaderID != "" && st.LeaderID != r.lastLeader {
		if r.lastLeader != "" {
			r.prevIDs, r.graceUntil = r.lastIDs, time.Now().Add(numberingGrace)
		}
		r.lastLeader = st.LeaderID
	}
	if st.LeaderID != "" {
		r.lastIDs = v.ids
	}
	v.prevIDs, v.graceUntil = r.prevIDs, r.graceUntil
	r.mu.Unlock()
	r.v.Store(v)
	return v
}

// liveFollowers are the members other than the leader heard from within
// liveGrace and not damaged, sorted. One not heard from at all counts for
// liveGrace after the leader took office (leadSince): a new leader that
// has not polled its followers yet does not drop their paths from the
// route it registers at once.
func liveFollowers(st broker.Status, now, leadSince time.Time) []string {
	live := []string{}
	for _, n := range st.Nodes {
		if n.ID == st.LeaderID || n.Damaged {
			continue
		}
		if n.LastSeen.IsZero() && now.Sub(leadSince) > liveGrace || !n.LastSeen.IsZero() && now.Sub(n.LastSeen) > liveGrace {
			continue
		}
		live = append(live, n.ID)
	}
	sort.Strings(live)
	return live
}

func (r *registrar) loop() {
	tick := time.NewTicker(viewPoll)
	defer tick.Stop()
	var last *view
	var lastSent time.Time
	var lastTopics, lastUsers string
	for {
		select {
		case <-r.a.stop:
			return
		case <-tick.C:
		case <-r.kick:
		}
		v := r.refresh()
		if v == nil || v.leader == "" || len(r.a.cfg.NameServers) == 0 {
			continue // an election (the id this node would register is unknown), or no name servers
		}
		// A topic created, grown or deleted is registered at once too, as
		// RocketMQ's brokers do, so clients that route through the name
		// servers find it within moments.
		// So is a user added, removed or given a new secret: the name
		// servers verify clients against the users registered.
		topics, users := r.topicsKey(), r.usersKey()
		if v.same(last) && topics == lastTopics && users == lastUsers && time.Since(lastSent) < r.a.cfg.RegisterPeriod {
			continue
		}
		if !v.same(last) {
			r.a.log.Info("registering with name servers", "broker_id", v.brokerID(v.self), "leader", v.leader, "term", v.term)
		}
		last, lastSent, lastTopics, lastUsers = v, time.Now(), topics, users
		if !r.registerAll(v) {
			// A name server did not take it (not started yet, restarting):
			// try again within a second, not a period.
			lastSent = time.Now().Add(time.Second - r.a.cfg.RegisterPeriod)
		}
	}
}

// topicsKey is the topics, queue counts and permissions this node would
// register, as one comparable string.
func (r *registrar) topicsKey() string {
	var b strings.Builder
	for _, t := range r.a.b.Topics() {
		fmt.Fprintf(&b, "%s/%d/%d;", t.Name, len(t.Queues), t.Perm)
	}
	return b.String()
}

// users is the group's users the registration carries (none without a
// node secret: the name servers could not verify the registration).
func (r *registrar) users() []namesrv.User {
	if len(r.a.cfg.NodeSecret) == 0 || r.a.cfg.Users == nil {
		return nil
	}
	return r.a.cfg.Users()
}

// usersKey is the users and sealed secrets registered, as one comparable
// string.
func (r *registrar) usersKey() string {
	var b strings.Builder
	for _, u := range r.users() {
		fmt.Fprintf(&b, "%s/%x;", u.Name, u.Sealed)
	}
	return b.String()
}

// sign signs a request to a name server with the node credential when
// the node has one.
func (r *registrar) sign(req *rmq.Command) *rmq.Command {
	if len(r.a.cfg.NodeSecret) > 0 {
		namesrv.SignNodeRequest(req, r.a.cfg.NodeSecret, time.Now())
	}
	return req
}

func (r *registrar) registration(v *view) namesrv.Registration {
	topics, perms := map[string]int{}, map[string]int{}
	for _, t := range r.a.b.Topics() {
		topics[t.Name] = len(t.Queues)
		if t.Perm != 0 && t.Perm != namesrv.PermReadWrite {
			perms[t.Name] = int(t.Perm)
		}
	}
	return namesrv.Registration{Cluster: r.a.cfg.Cluster, Group: r.a.b.Config().Group, Addr: r.a.cfg.Addr,
		BrokerID: v.brokerID(v.self), NodeID: v.self, Term: v.term, Topics: topics, Perms: perms,
		ClientAddr: r.a.b.Config().ClientAddr, ExternalClientAddr: r.a.b.Config().ExternalAddr,
		ExternalAddr: r.a.cfg.ExternalAddr, Members: v.members, NoRemoting: r.a.cfg.RegisterOnly,
		WriteVia: r.a.cfg.WriteViaFollowers && !r.a.cfg.RegisterOnly, Live: v.live, LiveKnown: v.liveSeen, Users: r.users()}
}

// registerAll registers with every name server at once; it reports
// whether all of them took it.
func (r *registrar) registerAll(v *view) bool {
	req, err := namesrv.RegisterRequest(r.registration(v))
	if err != nil {
		r.a.log.Error("registration", "error", err)
		return false
	}
	r.sign(req)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for _, ns := range r.a.cfg.NameServers {
		wg.Add(1)
		go func(ns string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			c := *req
			c.Ext = maps.Clone(req.Ext)
			resp, err := r.cl.Invoke(ctx, ns, &c)
			if err == nil && resp.Code != rmq.Success {
				err = &codeError{resp.Code, resp.Remark}
			}
			if err != nil {
				failed.Store(true)
			}
			r.mu.Lock()
			was := r.failed[ns]
			r.failed[ns] = err != nil
			r.mu.Unlock()
			var refusal *codeError
			switch {
			case errors.As(err, &refusal) && !was:
				// Another group holds this brokerName (or the name server
				// refuses it for another reason): no client reaches this
				// group through that name server until it is fixed.
				r.a.log.Error("name server refused this node's registration", "namesrv", ns, "code", refusal.code, "reason", refusal.remark)
			case err != nil && !was:
				r.a.log.Warn("register with name server", "namesrv", ns, "error", err)
			case err == nil && was:
				r.a.log.Info("registered with name server again", "namesrv", ns)
			}
		}(ns)
	}
	wg.Wait()
	return !failed.Load()
}

// unregister tells every name server this node is gone (a graceful stop),
// so that routes drop it at once instead of after the expiry.
func (r *registrar) unregister() {
	v := r.v.Load()
	if v == nil {
		return
	}
	var wg sync.WaitGroup
	for _, ns := range r.a.cfg.NameServers {
		wg.Add(1)
		go func(ns string) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			r.cl.Invoke(ctx, ns, r.sign(rmq.NewRequest(rmq.UnregisterBroker, map[string]string{"brokerAddr": r.a.cfg.Addr,
				"brokerName": r.a.b.Config().Group, "clusterName": r.a.cfg.Cluster}, nil)))
		}(ns)
	}
	wg.Wait()
}

type codeError struct {
	code   int32
	remark string
}

func (e *codeError) Error() string { return "code " + strconv.Itoa(int(e.code)) + ": " + e.remark }
