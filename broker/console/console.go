package console

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/mq"
)

//go:embed assets
var assets embed.FS

// Config is what a console reads.
type Config struct {
	// Status is the group as this node sees it (broker.Broker.Status).
	Status func() (broker.Status, error)
	// Metrics, when set, is the broker's registry: the produce and consume
	// rates are derived from its counters, and the console registers
	// raftmq_console_streams (the open event streams) in it.
	Metrics *prometheus.Registry
	// Every is how often a snapshot is pushed; default 1 s.
	Every time.Duration
	// Keep is how many leader changes the timeline holds; default 50.
	Keep int
	// Broker, when set, serves the pages beyond the overview
	// (*broker.Broker); without it the console is the overview alone.
	Broker Broker
	// Auth checks the credentials of those pages' reads and changes as the
	// gRPC API checks its calls (nil: none asked).
	Auth *auth.Authorizer
	// Cluster, when set (a node started with name servers), is every group
	// of the cluster with its status; the overview then shows them all.
	Cluster func(ctx context.Context) ([]GroupStatus, error)
}

// GroupStatus is one group of the cluster as one of its nodes told it
// (Err: none answered).
type GroupStatus struct {
	Name    string
	Cluster string
	Status  broker.Status
	Err     error
}

// ClusterGroup is one group of the overview's cluster view.
type ClusterGroup struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	Term    uint64 `json:"term"`
	Leader  string `json:"leader"`
	Nodes   []Node `json:"nodes"`
	Error   string `json:"error,omitempty"`
}

// clusterEvery is how long the cluster view is shown before the groups are
// asked again; the streams open on a node share one question.
const clusterEvery = 2 * time.Second

// Change is one leader change this node observed: Leader is the new
// leader's id, "" while the group has none.
type Change struct {
	Time   time.Time `json:"time"`
	Leader string    `json:"leader"`
	Term   uint64    `json:"term"`
}

// Node is one node of the snapshot.
type Node struct {
	ID       string  `json:"id"`
	Role     string  `json:"role"`
	Voter    bool    `json:"voter"`
	Healthy  bool    `json:"healthy"`
	Term     uint64  `json:"term"`
	Applied  uint64  `json:"applied"`
	Commit   uint64  `json:"commit"`
	Last     uint64  `json:"last"`
	Lag      uint64  `json:"lag"`
	Load     float64 `json:"load"`
	HTTPAddr string  `json:"http"`
	Client   string  `json:"client"`
	Error    string  `json:"error,omitempty"`
	Damaged  bool    `json:"damaged,omitempty"`
	// ServedAsLeader and ServedAsFollower: messages the node served to
	// consumers since it started, as last heard from it.
	ServedAsLeader   uint64 `json:"servedAsLeader"`
	ServedAsFollower uint64 `json:"servedAsFollower"`
}

// Snapshot is what the page shows, as one event.
type Snapshot struct {
	Time          time.Time `json:"time"`
	AnsweredBy    string    `json:"answeredBy"`
	Group         string    `json:"group"`
	GroupID       string    `json:"groupId"` // "" until the group is named
	Term          uint64    `json:"term"`
	Leader        string    `json:"leader"`
	LeaderChanges uint64    `json:"leaderChanges"`
	Nodes         []Node    `json:"nodes"`
	Timeline      []Change  `json:"timeline"`
	// ProduceRate and ConsumeRate are this node's messages a second:
	// acknowledged as leader, and served to consumers.
	ProduceRate float64 `json:"produceRate"`
	ConsumeRate float64 `json:"consumeRate"`
	Error       string  `json:"error,omitempty"`
	// Reads is how this node served consumers since it started.
	Reads *Reads `json:"reads,omitempty"`
	// GroupReads is how the group's nodes served consumers, each since it
	// started, as last heard from it (the suggestions are in Reads only).
	GroupReads *Reads `json:"groupReads,omitempty"`
	// Topics is the topics page's view, in a stream opened with
	// ?view=topics only.
	Topics []Topic `json:"topics"`
	// Groups is the groups page's view (?view=groups).
	Groups *Groups `json:"groups,omitempty"`
	// Cluster is every group of the cluster, in the overview of a node
	// started with name servers; ClusterError says why it is missing.
	Cluster      []ClusterGroup `json:"cluster,omitempty"`
	ClusterError string         `json:"clusterError,omitempty"`
}

// Views a stream may carry besides the overview (its query parameter
// view).
const (
	ViewOverview = ""
	ViewTopics   = "topics"
	ViewGroups   = "groups"
)

// Console is one node's console. Its methods may be called from any
// goroutine.
type Console struct {
	cfg    Config
	static http.Handler
	done   chan struct{}
	once   sync.Once

	mu        sync.Mutex
	timeline  []Change // oldest first, at most cfg.Keep
	subs      map[chan struct{}]struct{}
	rate      rateMeter
	topicRate topicMeter

	clusterMu   sync.Mutex // held while the groups are asked
	clusterAt   time.Time
	clusterLast []ClusterGroup
	clusterErr  error
}

// New returns a console; Close ends its open event streams.
func New(cfg Config) *Console {
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.Keep <= 0 {
		cfg.Keep = 50
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	c := &Console{cfg: cfg, static: http.FileServerFS(sub), done: make(chan struct{}), subs: map[chan struct{}]struct{}{}}
	if cfg.Metrics != nil {
		cfg.Metrics.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_console_streams",
			Help: "Console pages open on this node: its open event streams (/console/events)."},
			func() float64 { return float64(c.Streams()) }))
	}
	return c
}

// Streams is the number of open event streams.
func (c *Console) Streams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.subs)
}

// Close ends every open event stream (before the HTTP server's shutdown,
// which would otherwise wait for them). It is idempotent.
func (c *Console) Close() { c.once.Do(func() { close(c.done) }) }

// LeaderChanged records a change of leader (leader "" when the group has
// lost its leader) and pushes a snapshot to every open stream at once. A
// repeat of the last recorded leader is ignored. It does not block.
func (c *Console) LeaderChanged(leader string, term uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.timeline); n > 0 && c.timeline[n-1].Leader == leader {
		if term > c.timeline[n-1].Term {
			c.timeline[n-1].Term = term
		}
		return
	}
	if len(c.timeline) == 0 && leader == "" {
		return
	}
	c.timeline = append(c.timeline, Change{Time: time.Now(), Leader: leader, Term: term})
	if len(c.timeline) > c.cfg.Keep {
		c.timeline = append(c.timeline[:0], c.timeline[len(c.timeline)-c.cfg.Keep:]...)
	}
	for ch := range c.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Timeline is the leader changes recorded, oldest first.
func (c *Console) Timeline() []Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Change(nil), c.timeline...)
}

// Handler serves the page at /, its assets, /console/events (the stream),
// /console/snapshot (one snapshot as JSON; both take ?view=) and the
// pages' JSON API under /console/api/.
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", c.static)
	mux.HandleFunc("/console/events", c.events)
	mux.HandleFunc("/console/api/session", c.session)
	for path, h := range map[string]http.HandlerFunc{
		"/console/api/topics":       c.topicsAPI,
		"/console/api/groups/reset": c.resetAPI,
		"/console/api/deadletters":  c.deadLettersAPI,
		"/console/api/messages":     c.messagesAPI,
	} {
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			if c.cfg.Broker == nil {
				writeErr(w, http.StatusNotFound, errNoBroker)
				return
			}
			h(w, r)
		})
	}
	mux.HandleFunc("/console/snapshot", func(w http.ResponseWriter, r *http.Request) {
		view, user, ok := c.view(w, r)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(c.snapshot(r.Context(), view, user))
	})
	return mux
}

// allowOrigin lets a console page loaded from another node of the group
// read this node's snapshots: the page switches nodes when its own stops
// answering. The snapshots are what /metrics and `raftmq status` already
// show to anyone who reaches the port.
func allowOrigin(w http.ResponseWriter) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
}

// view reads a request's view and checks who may see it; it answers the
// request and returns false when refused.
func (c *Console) view(w http.ResponseWriter, r *http.Request) (view, user string, ok bool) {
	view = r.URL.Query().Get("view")
	switch view {
	case ViewOverview:
		allowOrigin(w)
	case ViewTopics, ViewGroups:
		// Beyond the overview, only pages of this group read the stream.
		if origin, ok := c.sameGroup(r); !ok {
			writeErr(w, http.StatusForbidden, fmt.Errorf("refused: the stream is asked for by a page of another site (%s), not by this group's console", origin))
			return "", "", false
		} else if origin != "" {
			w.Header().Set("Access-Control-Allow-Origin", origin)
			w.Header().Set("Vary", "Origin")
		}
		if c.cfg.Broker == nil {
			writeErr(w, http.StatusNotFound, errNoBroker)
			return "", "", false
		}
		// The overview is open to anyone who reaches the port, as
		// Status is; the rest is what ListTopics and ListGroups answer
		// (groups only those the user may subscribe to).
		cred := r.URL.Query().Get("cred")
		if err := c.checkCall(cred, methodRead, nil, r); err != nil {
			c.fail(w, err)
			return "", "", false
		}
		if cc, err := mq.ParseCallCredential(cred); err == nil {
			user = cc.AccessKey
		}
	default:
		writeErr(w, http.StatusBadRequest, fmt.Errorf("unknown view %.40q: want %q, %q or none", view, ViewTopics, ViewGroups))
		return "", "", false
	}
	return view, user, true
}

func (c *Console) events(w http.ResponseWriter, r *http.Request) {
	view, user, ok := c.view(w, r)
	if !ok {
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	kick := make(chan struct{}, 1)
	c.mu.Lock()
	c.subs[kick] = struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.subs, kick)
		c.mu.Unlock()
	}()
	t := time.NewTicker(c.cfg.Every)
	defer t.Stop()
	fmt.Fprintf(w, "retry: 1000\n\n")
	for {
		b, err := json.Marshal(c.snapshot(r.Context(), view, user))
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-t.C:
		case <-kick:
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		}
	}
}

// Snapshot is the group now, as the overview shows it.
func (c *Console) Snapshot() Snapshot { return c.snapshot(context.Background(), ViewOverview, "") }

// nodesOf appends st's nodes to out.
func nodesOf(st broker.Status, out []Node) []Node {
	for _, n := range st.Nodes {
		out = append(out, Node{ID: n.ID, Role: n.Role, Voter: n.Voter, Healthy: n.Healthy, Term: n.Term,
			Applied: n.Applied, Commit: n.Commit, Last: n.Last, Lag: n.Lag, Load: n.Load, HTTPAddr: n.HTTPAddr,
			Client: n.ClientAddr, Error: n.Error, Damaged: n.Damaged, ServedAsLeader: n.ServedAsLeader, ServedAsFollower: n.ServedAsFollower})
	}
	return out
}

// groupReads sums the nodes' served messages.
func groupReads(nodes []Node) *Reads {
	r := &Reads{Suggestions: []Suggestion{}}
	for _, n := range nodes {
		r.AsLeader += float64(n.ServedAsLeader)
		r.AsFollower += float64(n.ServedAsFollower)
	}
	if n := r.AsLeader + r.AsFollower; n > 0 {
		r.FollowerShare = r.AsFollower / n
	}
	return r
}

// cluster is the cluster view, asked again once it is clusterEvery old.
func (c *Console) cluster(ctx context.Context) ([]ClusterGroup, error) {
	c.clusterMu.Lock()
	defer c.clusterMu.Unlock()
	if time.Since(c.clusterAt) < clusterEvery {
		return c.clusterLast, c.clusterErr
	}
	// One stream's page closing must not fail the question the others share.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	groups, err := c.cfg.Cluster(ctx)
	out := make([]ClusterGroup, 0, len(groups))
	for _, g := range groups {
		cg := ClusterGroup{Name: g.Name, Cluster: g.Cluster, Term: g.Status.Term, Leader: g.Status.LeaderID,
			Nodes: nodesOf(g.Status, []Node{})}
		if g.Err != nil {
			cg.Error = g.Err.Error()
		}
		out = append(out, cg)
	}
	c.clusterAt, c.clusterLast, c.clusterErr = time.Now(), out, err
	return out, err
}

// snapshot is the group now with view's page, as user may see it.
func (c *Console) snapshot(ctx context.Context, view, user string) Snapshot {
	snap := Snapshot{Time: time.Now(), Timeline: c.Timeline(), Nodes: []Node{}}
	st, err := c.cfg.Status()
	if err != nil {
		snap.Error = err.Error()
	}
	snap.AnsweredBy, snap.Group, snap.GroupID, snap.Term, snap.Leader, snap.LeaderChanges = st.AnsweredBy, st.Group, st.GroupID, st.Term, st.LeaderID, st.LeaderChanges
	snap.Nodes = nodesOf(st, snap.Nodes)
	if len(snap.Nodes) > 0 {
		snap.GroupReads = groupReads(snap.Nodes)
	}
	if c.cfg.Metrics != nil {
		produced, consumed, reads := counters(c.cfg.Metrics)
		snap.Reads = reads
		c.mu.Lock()
		snap.ProduceRate, snap.ConsumeRate = c.rate.add(snap.Time, produced, consumed)
		c.mu.Unlock()
	}
	switch view {
	case ViewOverview:
		if c.cfg.Cluster != nil {
			var err error
			if snap.Cluster, err = c.cluster(ctx); err != nil {
				snap.ClusterError = err.Error()
			}
		}
	case ViewTopics:
		snap.Topics = c.topics(snap.Time)
	case ViewGroups:
		leaderHTTP := ""
		for _, n := range snap.Nodes {
			if n.ID == snap.Leader {
				leaderHTTP = n.HTTPAddr
			}
		}
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		snap.Groups = c.groups(ctx, user, leaderHTTP)
		cancel()
	}
	return snap
}

// Reads is how a node served consumers since it started, from the
// broker's counters: messages it served as leader and as follower, and the
// next-pull suggestions it gave (where it sent each consumer, and why).
type Reads struct {
	AsLeader      float64      `json:"asLeader"`
	AsFollower    float64      `json:"asFollower"`
	FollowerShare float64      `json:"followerShare"` // of the messages served, 0..1
	Suggestions   []Suggestion `json:"suggestions"`   // most given first
}

// Suggestion counts the next-pull suggestions of one target and reason.
type Suggestion struct {
	Target string  `json:"target"` // self, leader or follower
	Reason string  `json:"reason"`
	Count  float64 `json:"count"`
}

// counters sums the broker's produce and consume counters and reads its
// read-routing counters.
func counters(g prometheus.Gatherer) (produced, consumed float64, reads *Reads) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, 0, nil
	}
	reads = &Reads{Suggestions: []Suggestion{}}
	for _, mf := range mfs {
		switch mf.GetName() {
		case "raftmq_produce_messages_total":
			for _, m := range mf.GetMetric() {
				produced += m.GetCounter().GetValue()
			}
		case "raftmq_pull_messages_total":
			for _, m := range mf.GetMetric() {
				v := m.GetCounter().GetValue()
				consumed += v
				if label(m, "role") == "leader" {
					reads.AsLeader += v
				} else {
					reads.AsFollower += v
				}
			}
		case "raftmq_pull_suggestions_total":
			for _, m := range mf.GetMetric() {
				reads.Suggestions = append(reads.Suggestions, Suggestion{Target: label(m, "target"), Reason: label(m, "reason"), Count: m.GetCounter().GetValue()})
			}
		}
	}
	if n := reads.AsLeader + reads.AsFollower; n > 0 {
		reads.FollowerShare = reads.AsFollower / n
	}
	sort.Slice(reads.Suggestions, func(i, j int) bool { return reads.Suggestions[i].Count > reads.Suggestions[j].Count })
	return produced, consumed, reads
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// rateMeter turns counter samples into rates over at least minSpan, so
// that several open pages sampling at once do not make the rate jitter.
type rateMeter struct {
	at                 time.Time
	produced, consumed float64
	pRate, cRate       float64
}

const minSpan = 900 * time.Millisecond

func (m *rateMeter) add(now time.Time, produced, consumed float64) (float64, float64) {
	if m.at.IsZero() {
		m.at, m.produced, m.consumed = now, produced, consumed
		return 0, 0
	}
	if d := now.Sub(m.at); d >= minSpan {
		s := d.Seconds()
		m.pRate, m.cRate = max(0, (produced-m.produced)/s), max(0, (consumed-m.consumed)/s)
		m.at, m.produced, m.consumed = now, produced, consumed
	}
	return m.pRate, m.cRate
}
