package groups

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/raftmq/raftmq/broker/brokererr"
)

// Assignment is the queues of one topic given to one member.
type Assignment struct {
	Topic  string
	Queues []int32
}

// State is what the table reads of the applied state: a topic's queues.
type State interface {
	QueueCount(topic string) int
}

// Member is one live member as the table knows it.
type Member struct {
	ID          string
	Topics      []string // sorted
	LastSeen    time.Time
	Assignments []Assignment
}

type member struct {
	id       string
	topics   []string
	lastSeen time.Time
}

type groupState struct {
	broadcast  bool // every member reads every queue
	members    map[string]*member
	generation uint64
	assigned   map[string][]Assignment // member -> assignment
}

// Table is the leader's consumer group membership. One mutex guards it; it
// calls nothing else while holding it but the state's QueueCount.
type Table struct {
	fsm     State
	log     hclog.Logger
	session time.Duration // a member silent for this long is dropped

	mu     sync.Mutex
	term   uint64
	groups map[string]*groupState
}

// New returns an empty table over fsm; members silent for session are
// dropped.
func New(fsm State, logger hclog.Logger, session time.Duration) *Table {
	return &Table{fsm: fsm, log: logger, session: session, groups: map[string]*groupState{}}
}

// Reset forgets all members; a new leader (of term) starts from scratch.
func (t *Table) Reset(term uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.term = term
	t.groups = map[string]*groupState{}
}

// Join registers or refreshes a member of group at now and returns the
// group's generation and the member's assignment. A member of the other
// kind (broadcasting or clustering) than the group's live members is
// refused (brokererr.ErrFailedPrecondition).
func (t *Table) Join(group, memberID string, topics []string, broadcast bool, now time.Time) (uint64, []Assignment, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	gs := t.groups[group]
	if gs == nil {
		gs = &groupState{members: map[string]*member{}}
		t.groups[group] = gs
	}
	changed := t.expireLocked(gs, now)
	if err := modeLocked(group, gs, memberID, broadcast); err != nil {
		return 0, nil, err
	}
	m := gs.members[memberID]
	sorted := append([]string{}, topics...)
	sort.Strings(sorted)
	if m == nil || fmt.Sprint(m.topics) != fmt.Sprint(sorted) {
		changed = true
		m = &member{id: memberID, topics: sorted}
		gs.members[memberID] = m
	}
	m.lastSeen = now
	if changed || gs.assigned == nil {
		t.rebalanceLocked(gs)
	}
	return gs.generation, gs.assigned[memberID], nil
}

// Leave removes a member at once.
func (t *Table) Leave(group, memberID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if gs := t.groups[group]; gs != nil && gs.members[memberID] != nil {
		delete(gs.members, memberID)
		t.rebalanceLocked(gs)
	}
}

// Forget drops a group and its members.
func (t *Table) Forget(group string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.groups, group)
}

// Names lists the groups with members.
func (t *Table) Names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for g, gs := range t.groups {
		if len(gs.members) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// View is a group as the table knows it.
type View struct {
	Generation uint64
	Broadcast  bool     // a broadcasting group with live members
	Members    []Member // unordered
}

// Describe returns group after dropping its members silent at now; ok is
// false when the table never heard of it.
func (t *Table) Describe(group string, now time.Time) (View, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	gs := t.groups[group]
	if gs == nil {
		return View{}, false
	}
	t.expireLocked(gs, now)
	v := View{Generation: gs.generation, Broadcast: gs.broadcast && len(gs.members) > 0}
	for id, m := range gs.members {
		v.Members = append(v.Members, Member{ID: id, Topics: m.topics, LastSeen: m.lastSeen, Assignments: gs.assigned[id]})
	}
	return v, true
}

// Live counts group's members after dropping those silent at now.
func (t *Table) Live(group string, now time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	gs := t.groups[group]
	if gs == nil {
		return 0
	}
	t.expireLocked(gs, now)
	return len(gs.members)
}

// LiveMembers counts, per group, the members heard from within their
// session at now that match (groups that lost members are rebalanced).
func (t *Table) LiveMembers(now time.Time, match func(Member) bool) map[string]int {
	out := map[string]int{}
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, gs := range t.groups {
		if t.expireLocked(gs, now) {
			t.rebalanceLocked(gs)
		}
		for id, m := range gs.members {
			if match(Member{ID: id, Topics: m.topics, LastSeen: m.lastSeen}) {
				out[name]++
			}
		}
	}
	return out
}

func (t *Table) expireLocked(gs *groupState, now time.Time) bool {
	changed := false
	for id, m := range gs.members {
		if now.Sub(m.lastSeen) > t.session {
			delete(gs.members, id)
			changed = true
			t.log.Info("consumer group member expired", "member", id)
		}
	}
	return changed
}

// rebalanceLocked assigns every queue of every subscribed topic to exactly
// one subscribed member: queues and members sorted, queue i to member
// i mod n. Deterministic and balanced to within one queue.
func (t *Table) rebalanceLocked(gs *groupState) {
	gs.generation = t.term<<32 | (gs.generation&0xffffffff + 1)
	gs.assigned = map[string][]Assignment{}
	if gs.broadcast {
		t.assignAllLocked(gs)
		return
	}
	subs := map[string][]string{}
	for id, m := range gs.members {
		for _, topic := range m.topics {
			subs[topic] = append(subs[topic], id)
		}
	}
	for topic, ids := range subs {
		sort.Strings(ids)
		nq := t.fsm.QueueCount(topic)
		per := map[string][]int32{}
		for q := 0; q < nq; q++ {
			id := ids[q%len(ids)]
			per[id] = append(per[id], int32(q))
		}
		for id, qs := range per {
			gs.assigned[id] = append(gs.assigned[id], Assignment{Topic: topic, Queues: qs})
		}
	}
	for id := range gs.assigned {
		as := gs.assigned[id]
		sort.Slice(as, func(i, j int) bool { return as[i].Topic < as[j].Topic })
	}
}

// Broadcasting consumer groups (RocketMQ's BROADCASTING model): every member
// is assigned every queue of its topics, and each member keeps its own
// committed offsets, replicated like a group's under
// store.MemberKey(group, member). A group is broadcasting or clustering by
// how its live members joined; a member of the other kind is refused while
// any is live.

func modeName(broadcast bool) string {
	if broadcast {
		return "broadcasting"
	}
	return "clustering"
}

// modeLocked makes gs of the joining member's kind, or refuses the member
// while another member of the other kind is live.
func modeLocked(group string, gs *groupState, memberID string, broadcast bool) error {
	if gs.broadcast == broadcast {
		return nil
	}
	others := 0
	for id := range gs.members {
		if id != memberID {
			others++
		}
	}
	if others > 0 {
		return fmt.Errorf("%w: consumer group %q has %d live %s member(s); a %s member cannot join it: use another group name, or stop them first",
			brokererr.ErrFailedPrecondition, group, others, modeName(gs.broadcast), modeName(broadcast))
	}
	delete(gs.members, memberID)
	gs.broadcast, gs.assigned = broadcast, nil
	return nil
}

// assignAllLocked gives every member every queue of each of its topics.
func (t *Table) assignAllLocked(gs *groupState) {
	for id, m := range gs.members {
		for _, topic := range m.topics {
			nq := t.fsm.QueueCount(topic)
			qs := make([]int32, nq)
			for q := range qs {
				qs[q] = int32(q)
			}
			gs.assigned[id] = append(gs.assigned[id], Assignment{Topic: topic, Queues: qs})
		}
	}
}
