package console

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

const (
	methodResetGroup = api.Broker_ResetGroup_FullMethodName
	methodResend     = api.Broker_ResendDeadLetter_FullMethodName

	// maxGroups bounds the groups one snapshot describes.
	maxGroups = 100
	// maxDeadLetters bounds the dead letters one listing reads.
	maxDeadLetters = 200
)

func groupNeed(a auth.Action, group string) []auth.Need {
	return []auth.Need{{Action: a, Resource: auth.Group(group)}}
}

// GroupMember is one live member of a group and the queues it holds.
type GroupMember struct {
	ID       string             `json:"id"`
	Queues   map[string][]int32 `json:"queues"` // topic -> queues assigned
	LastSeen time.Time          `json:"lastSeen"`
}

// GroupQueue is one queue a group reads: its committed offset (-1: none)
// and its lag behind the queue's maximum offset.
type GroupQueue struct {
	Topic     string `json:"topic"`
	Queue     int32  `json:"queue"`
	Member    string `json:"member"`
	Committed int64  `json:"committed"`
	Max       uint64 `json:"max"`
	Lag       uint64 `json:"lag"`
}

// Group is one consumer group as the leader knows it.
type Group struct {
	Name        string        `json:"name"`
	Generation  uint64        `json:"generation"`
	Broadcast   bool          `json:"broadcast"`
	MaxRetries  int32         `json:"maxReconsumeTimes"`
	Members     []GroupMember `json:"members"`
	Queues      []GroupQueue  `json:"queues"`
	Lag         uint64        `json:"lag"`
	DeadLetters uint64        `json:"deadLetters"`
	Error       string        `json:"error,omitempty"`
}

// Groups is the groups page's view. Groups are the leader's to describe
// (it alone knows the live members): on another node Error says so and
// LeaderHTTP names where the page finds them.
type Groups struct {
	Groups     []Group `json:"groups"`
	More       int     `json:"more,omitempty"` // groups beyond maxGroups, not described
	Error      string  `json:"error,omitempty"`
	LeaderHTTP string  `json:"leaderHttp,omitempty"`
}

// groups describes the groups user may read (subscribe on the group).
func (c *Console) groups(ctx context.Context, user string, leaderHTTP string) *Groups {
	out := &Groups{Groups: []Group{}}
	names, err := c.cfg.Broker.ListGroups(ctx)
	if err != nil {
		out.Error = err.Error()
		var nl *broker.NotLeaderError
		if errors.As(err, &nl) {
			out.LeaderHTTP = leaderHTTP
		}
		return out
	}
	dead := map[string]uint64{}
	for _, ti := range c.cfg.Broker.Topics() {
		if mq.IsDeadLetterTopic(ti.Name) {
			for _, q := range ti.Queues {
				dead[ti.Name] += q.Max - min(q.Min, q.Max)
			}
		}
	}
	for _, name := range names {
		if !c.cfg.Auth.May(user, groupNeed(auth.Subscribe, name)...) {
			continue
		}
		if len(out.Groups) == maxGroups {
			out.More++
			continue
		}
		g := Group{Name: name, Members: []GroupMember{}, Queues: []GroupQueue{}, DeadLetters: dead[mq.DeadLetterTopic(name)]}
		info, err := c.cfg.Broker.DescribeGroup(ctx, name)
		if err != nil {
			g.Error = err.Error()
			out.Groups = append(out.Groups, g)
			continue
		}
		g.Generation, g.Broadcast, g.MaxRetries = info.Generation, info.Broadcast, info.Settings.MaxReconsumeTimes
		for _, m := range info.Members {
			gm := GroupMember{ID: m.ID, Queues: map[string][]int32{}, LastSeen: m.LastSeen}
			for _, a := range m.Assignments {
				gm.Queues[a.Topic] = append(gm.Queues[a.Topic], a.Queues...)
			}
			g.Members = append(g.Members, gm)
		}
		for _, q := range info.Queues {
			g.Queues = append(g.Queues, GroupQueue{Topic: q.Topic, Queue: q.Queue, Member: q.Member, Committed: q.Committed, Max: q.MaxOffset, Lag: q.Lag})
			g.Lag += q.Lag
		}
		out.Groups = append(out.Groups, g)
	}
	return out
}

// ResetGroup is the body of POST /console/api/groups/reset.
type ResetGroup struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	// To is "earliest", "latest", an offset, or "@" and a unix time in
	// milliseconds, as `raftmq group reset --to`.
	To     string  `json:"to"`
	Queues []int32 `json:"queues"` // none: every queue
	DryRun bool    `json:"dryRun"`
}

// DecodeResetGroup reads and checks a ResetGroup.
func DecodeResetGroup(r io.Reader) (ResetGroup, error) {
	var req ResetGroup
	if err := decodeJSON(r, &req); err != nil {
		return ResetGroup{}, err
	}
	if err := store.ValidateName("group", req.Group); err != nil {
		return ResetGroup{}, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	if err := store.ValidateName("topic", req.Topic); err != nil {
		return ResetGroup{}, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	if err := checkResetTo(req.To); err != nil {
		return ResetGroup{}, err
	}
	if len(req.Queues) > store.MaxQueues {
		return ResetGroup{}, fmt.Errorf("%w: %d queues named, a topic has at most %d", errBadRequest, len(req.Queues), store.MaxQueues)
	}
	for _, q := range req.Queues {
		if q < 0 || q >= store.MaxQueues {
			return ResetGroup{}, fmt.Errorf("%w: queue %d: want 0..%d", errBadRequest, q, store.MaxQueues-1)
		}
	}
	return req, nil
}

// checkResetTo checks a reset's target before the broker reads it, so
// that a bad one is told as such whatever the group's state.
func checkResetTo(to string) error {
	bad := func() error {
		return fmt.Errorf("%w: reset to %.40q: want earliest, latest, an offset, or @ and a unix time in milliseconds", errBadRequest, to)
	}
	switch {
	case to == "earliest" || to == "latest":
		return nil
	case strings.HasPrefix(to, "@"):
		ms, err := strconv.ParseInt(to[1:], 10, 64)
		if err != nil || ms < 0 {
			return bad()
		}
		return nil
	default:
		if _, err := strconv.ParseUint(to, 10, 64); err != nil {
			return bad()
		}
		return nil
	}
}

// ResendDeadLetter is the body of POST /console/api/deadletters/resend.
type ResendDeadLetter struct {
	Group string `json:"group"`
	ID    string `json:"id"`
}

// DecodeResend reads and checks a ResendDeadLetter.
func DecodeResend(r io.Reader) (ResendDeadLetter, error) {
	var req ResendDeadLetter
	if err := decodeJSON(r, &req); err != nil {
		return ResendDeadLetter{}, err
	}
	if err := store.ValidateName("group", req.Group); err != nil {
		return ResendDeadLetter{}, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	if _, _, err := broker.ParseMessageID(req.ID); err != nil {
		return ResendDeadLetter{}, fmt.Errorf("%w: message id %.80q: %w", errBadRequest, req.ID, err)
	}
	return req, nil
}

// DeadLetter is one dead letter of a group.
type DeadLetter struct {
	ID         string `json:"id"`
	Topic      string `json:"topic"` // its original topic
	Queue      int32  `json:"queue"`
	Offset     uint64 `json:"offset"`
	Reconsumed int    `json:"reconsumed"`
	Reason     string `json:"reason"`
	Born       int64  `json:"born"`
	Key        string `json:"key,omitempty"`
	Body       string `json:"body"`
	BodyHex    string `json:"bodyHex"`
	Text       bool   `json:"text"` // the body is UTF-8 text
	Size       int    `json:"size"`
}

// deadLetters reads up to max of group's dead letters, oldest first.
func (c *Console) deadLetters(ctx context.Context, group string, max int) ([]DeadLetter, error) {
	out := []DeadLetter{}
	var ti store.TopicInfo
	found := false
	for _, t := range c.cfg.Broker.Topics() {
		if t.Name == mq.DeadLetterTopic(group) {
			ti, found = t, true
		}
	}
	if !found {
		return out, nil
	}
	for q, rng := range ti.Queues {
		for off := rng.Min; off < rng.Max && len(out) < max; {
			r, err := c.cfg.Broker.Pull(ctx, broker.PullRequest{Topic: ti.Name, Queue: int32(q), Offset: off, MaxMessages: min(256, max-len(out)), MaxBytes: 4 << 20})
			if err != nil {
				return nil, err
			}
			if r.Status != broker.PullFound && r.Status != broker.PullOffsetMoved || r.NextOffset <= off {
				break
			}
			for _, m := range r.Messages {
				n, _ := strconv.Atoi(m.Properties[mq.PropReconsumeTime])
				d := DeadLetter{ID: m.ID, Topic: m.Properties[mq.PropRetryTopic], Queue: m.Queue, Offset: m.Offset, Reconsumed: n,
					Reason: m.Properties[mq.PropDeadLetterReason], Born: m.Timestamp, Key: m.Key}
				d.Body, d.BodyHex, d.Text, d.Size = bodyOf(m.Body)
				out = append(out, d)
			}
			off = r.NextOffset
		}
	}
	return out, nil
}

// resetAPI serves POST /console/api/groups/reset: a dry run or a reset.
func (c *Console) resetAPI(w http.ResponseWriter, r *http.Request) {
	if !c.guard(w, r) {
		return
	}
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	req, err := DecodeResetGroup(r.Body)
	if err != nil {
		c.fail(w, err)
		return
	}
	if err := c.checkCall(r.Header.Get(CredentialHeader), methodResetGroup, groupNeed(auth.Admin, req.Group), r); err != nil {
		c.fail(w, err)
		return
	}
	offs, err := c.cfg.Broker.ResetGroup(r.Context(), broker.ResetRequest{Group: req.Group, Topic: req.Topic, To: req.To, Queues: req.Queues, DryRun: req.DryRun})
	if err != nil {
		c.fail(w, err)
		return
	}
	if offs == nil {
		offs = []store.OffsetEntry{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": req.Group, "topic": req.Topic, "dryRun": req.DryRun, "offsets": offs})
}

// deadLettersAPI serves /console/api/deadletters: GET ?group=&max= lists
// a group's dead letters, POST resends one.
func (c *Console) deadLettersAPI(w http.ResponseWriter, r *http.Request) {
	if !c.guard(w, r) {
		return
	}
	cred := r.Header.Get(CredentialHeader)
	switch r.Method {
	case http.MethodGet:
		group := r.URL.Query().Get("group")
		if err := store.ValidateName("group", group); err != nil {
			c.fail(w, fmt.Errorf("%w: %w", errBadRequest, err))
			return
		}
		max := 50
		if s := r.URL.Query().Get("max"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > maxDeadLetters {
				c.fail(w, fmt.Errorf("%w: max=%.20q: want 1..%d", errBadRequest, s, maxDeadLetters))
				return
			}
			max = n
		}
		if err := c.checkCall(cred, methodRead, groupNeed(auth.Subscribe, group), r); err != nil {
			c.fail(w, err)
			return
		}
		dls, err := c.deadLetters(r.Context(), group, max)
		if err != nil {
			c.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, dls)
	case http.MethodPost:
		req, err := DecodeResend(r.Body)
		if err != nil {
			c.fail(w, err)
			return
		}
		if err := c.checkCall(cred, methodResend, groupNeed(auth.Subscribe, req.Group), r); err != nil {
			c.fail(w, err)
			return
		}
		res, err := c.cfg.Broker.ResendDeadLetter(r.Context(), req.Group, req.ID)
		if err != nil {
			c.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"topic": res.Topic, "queue": res.Ack.Queue, "offset": res.Ack.Offset, "id": res.Ack.ID(), "duplicate": res.Duplicate})
	default:
		methodNotAllowed(w, "GET", "POST")
	}
}

// maxShownBody bounds the body a page is sent of one message.
const maxShownBody = 16 << 10

// bodyOf is a body as the page shows it: as text when it is UTF-8, and in
// hex, each cut at maxShownBody bytes.
func bodyOf(b []byte) (text, hexed string, isText bool, size int) {
	size = len(b)
	shown := b[:min(len(b), maxShownBody)]
	isText = utf8.Valid(b)
	if isText {
		text = string(shown)
	}
	return text, hex.EncodeToString(shown), isText, size
}
