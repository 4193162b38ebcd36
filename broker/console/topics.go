package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/mq"
	"github.com/raftmq/raftmq/store"
)

// Broker is what the pages beyond the overview read and change: the
// broker calls the gRPC API and the CLI make (*broker.Broker).
type Broker interface {
	Topics() []store.TopicInfo
	ClientCreateTopic(ctx context.Context, name string, queues int32, ifNotExists bool) (store.TopicInfo, error)
	DeleteTopic(ctx context.Context, name string, force bool) error
	UpdateTopic(ctx context.Context, name string, perm *uint32) (store.TopicInfo, error)
	ListGroups(ctx context.Context) ([]string, error)
	DescribeGroup(ctx context.Context, group string) (broker.GroupInfo, error)
	ResetGroup(ctx context.Context, req broker.ResetRequest) ([]store.OffsetEntry, error)
	ResendDeadLetter(ctx context.Context, group, id string) (broker.ResendResult, error)
	Pull(ctx context.Context, req broker.PullRequest) (broker.PullResult, error)
	LookupMessage(ctx context.Context, id string) (broker.LookupResult, error)
	FindMessages(req broker.FindRequest) ([]broker.Message, error)
	ID() string
}

var _ Broker = (*broker.Broker)(nil)

// Queue is one queue of a topic: its minimum and maximum offsets.
type Queue struct {
	ID  int    `json:"id"`
	Min uint64 `json:"min"`
	Max uint64 `json:"max"`
}

// Topic is one topic as this node has applied it.
type Topic struct {
	Name     string  `json:"name"`
	Perm     uint32  `json:"perm"`
	Readable bool    `json:"readable"`
	Writable bool    `json:"writable"`
	System   bool    `json:"system"`
	Messages uint64  `json:"messages"` // held: the sum of max-min
	Rate     float64 `json:"rate"`     // messages a second appended, from the growth of the max offsets
	Queues   []Queue `json:"queues"`
}

// topics is the topics view, sorted by name, system topics last.
func (c *Console) topics(now time.Time) []Topic {
	tis := c.cfg.Broker.Topics()
	out := make([]Topic, 0, len(tis))
	ends := make(map[string]uint64, len(tis))
	for _, ti := range tis {
		t := Topic{Name: ti.Name, Perm: ti.Perm, Readable: ti.Readable(), Writable: ti.Writable(), System: mq.IsSystemTopic(ti.Name),
			Queues: make([]Queue, len(ti.Queues))}
		if t.Perm == 0 {
			t.Perm = store.PermRead | store.PermWrite
		}
		var end uint64
		for i, q := range ti.Queues {
			t.Queues[i] = Queue{ID: i, Min: q.Min, Max: q.Max}
			end += q.Max
			t.Messages += q.Max - min(q.Min, q.Max)
		}
		ends[ti.Name] = end
		out = append(out, t)
	}
	c.mu.Lock()
	rates := c.topicRate.add(now, ends)
	c.mu.Unlock()
	for i := range out {
		out[i].Rate = rates[out[i].Name]
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].System != out[j].System {
			return !out[i].System
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// topicMeter turns samples of each topic's summed max offsets into rates
// over at least minSpan, as rateMeter does for the node's counters.
type topicMeter struct {
	at    time.Time
	ends  map[string]uint64
	rates map[string]float64
}

func (m *topicMeter) add(now time.Time, ends map[string]uint64) map[string]float64 {
	if m.at.IsZero() {
		m.at, m.ends, m.rates = now, ends, map[string]float64{}
		return m.rates
	}
	if d := now.Sub(m.at); d >= minSpan {
		rates := make(map[string]float64, len(ends))
		for name, end := range ends {
			if prev, ok := m.ends[name]; ok && end >= prev {
				rates[name] = float64(end-prev) / d.Seconds()
			}
		}
		m.at, m.ends, m.rates = now, ends, rates
	}
	return m.rates
}

// CreateTopic is the body of POST /console/api/topics.
type CreateTopic struct {
	Name string `json:"name"`
	// Queues is the number of queues; 0 takes the node's --default-queues.
	Queues int64 `json:"queues"`
}

// maxBody bounds a change's body: a name and a few numbers.
const maxBody = 4 << 10

// errBadRequest marks a request the console cannot read.
var errBadRequest = broker.ErrInvalidArgument

// decodeJSON reads one JSON object of at most maxBody bytes into v,
// refusing unknown fields and trailing data.
func decodeJSON(r io.Reader, v any) error {
	lr := &io.LimitedReader{R: r, N: maxBody + 1}
	dec := json.NewDecoder(lr)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("%w: request body over %d bytes", errBadRequest, maxBody)
		}
		return fmt.Errorf("%w: request body: %w", errBadRequest, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: request body: data after the JSON object", errBadRequest)
	}
	return nil
}

// DecodeCreateTopic reads and checks a CreateTopic.
func DecodeCreateTopic(r io.Reader) (CreateTopic, error) {
	var req CreateTopic
	if err := decodeJSON(r, &req); err != nil {
		return CreateTopic{}, err
	}
	if err := store.ValidateName("topic", req.Name); err != nil {
		return CreateTopic{}, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	if req.Queues < 0 || req.Queues > store.MaxQueues {
		return CreateTopic{}, fmt.Errorf("%w: %d queues: want 1..%d (0: the node's default)", errBadRequest, req.Queues, store.MaxQueues)
	}
	return req, nil
}

// UpdateTopic is the body of PATCH /console/api/topics: the topic's new
// permission, RocketMQ's bits (6 read and write, 4 read only, 2 write
// only), as `raftmq topic update --perm` sets it.
type UpdateTopic struct {
	Name string `json:"name"`
	Perm uint32 `json:"perm"`
}

// DecodeUpdateTopic reads and checks an UpdateTopic.
func DecodeUpdateTopic(r io.Reader) (UpdateTopic, error) {
	var req UpdateTopic
	if err := decodeJSON(r, &req); err != nil {
		return UpdateTopic{}, err
	}
	if err := store.ValidateName("topic", req.Name); err != nil {
		return UpdateTopic{}, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	if err := store.ValidatePerm(req.Perm); err != nil {
		return UpdateTopic{}, fmt.Errorf("%w: %w", errBadRequest, err)
	}
	return req, nil
}

// topicsAPI serves /console/api/topics: GET lists (as the stream's topics
// view does), POST creates, PATCH sets a permission, DELETE ?name=&force=
// deletes.
func (c *Console) topicsAPI(w http.ResponseWriter, r *http.Request) {
	if !c.guard(w, r) {
		return
	}
	cred := r.Header.Get(CredentialHeader)
	switch r.Method {
	case http.MethodGet:
		if err := c.checkCall(cred, methodRead, nil, r); err != nil {
			c.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, c.topics(time.Now()))
	case http.MethodPost:
		req, err := DecodeCreateTopic(r.Body)
		if err != nil {
			c.fail(w, err)
			return
		}
		if err := c.checkCall(cred, methodCreateTopic, topicAdmin(req.Name), r); err != nil {
			c.fail(w, err)
			return
		}
		ti, err := c.cfg.Broker.ClientCreateTopic(r.Context(), req.Name, int32(req.Queues), false)
		if err != nil {
			c.fail(w, err)
			return
		}
		writeJSON(w, http.StatusCreated, map[string]any{"name": ti.Name, "queues": len(ti.Queues)})
	case http.MethodPatch:
		req, err := DecodeUpdateTopic(r.Body)
		if err != nil {
			c.fail(w, err)
			return
		}
		if err := c.checkCall(cred, methodUpdateTopic, topicAdmin(req.Name), r); err != nil {
			c.fail(w, err)
			return
		}
		ti, err := c.cfg.Broker.UpdateTopic(r.Context(), req.Name, &req.Perm)
		if err != nil {
			c.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"name": ti.Name, "perm": ti.Perm})
	case http.MethodDelete:
		name := r.URL.Query().Get("name")
		if err := store.ValidateName("topic", name); err != nil {
			c.fail(w, fmt.Errorf("%w: %w", errBadRequest, err))
			return
		}
		force, err := parseBool(r.URL.Query().Get("force"))
		if err != nil {
			c.fail(w, err)
			return
		}
		if err := c.checkCall(cred, methodDeleteTopic, topicAdmin(name), r); err != nil {
			c.fail(w, err)
			return
		}
		if err := c.cfg.Broker.DeleteTopic(r.Context(), name, force); err != nil {
			c.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"deleted": name})
	default:
		methodNotAllowed(w, "GET", "POST", "PATCH", "DELETE")
	}
}

func parseBool(s string) (bool, error) {
	if s == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("%w: force=%q: want true or false", errBadRequest, s)
	}
	return b, nil
}

var errNoBroker = errors.New("this console serves the overview only")
