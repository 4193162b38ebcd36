package console

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/store"
)

const (
	methodLookup = api.Broker_LookupMessage_FullMethodName
	methodFind   = api.Broker_FindMessages_FullMethodName

	// maxFound bounds the messages one lookup by key answers.
	maxFound = 64
)

// ShownMessage is a message as the messages page shows it, with the node
// that read it.
type ShownMessage struct {
	ID         string            `json:"id"`
	Topic      string            `json:"topic"`
	Queue      int32             `json:"queue"`
	Offset     uint64            `json:"offset"`
	Key        string            `json:"key,omitempty"`
	Tag        string            `json:"tag,omitempty"`
	Born       int64             `json:"born"`
	Properties map[string]string `json:"properties,omitempty"`
	Body       string            `json:"body"`
	BodyHex    string            `json:"bodyHex"`
	Text       bool              `json:"text"`
	Size       int               `json:"size"`
	ServedBy   string            `json:"servedBy"`
	Pending    bool              `json:"pending,omitempty"` // a delayed message not delivered yet
	DeliverAt  int64             `json:"deliverAt,omitempty"`
}

func shown(m broker.Message, servedBy string) ShownMessage {
	s := ShownMessage{ID: m.ID, Topic: m.Topic, Queue: m.Queue, Offset: m.Offset, Key: m.Key, Tag: m.Tag, Born: m.Timestamp,
		Properties: m.Properties, ServedBy: servedBy}
	s.Body, s.BodyHex, s.Text, s.Size = bodyOf(m.Body)
	return s
}

// messagesAPI serves GET /console/api/messages: ?id= looks one message up
// by id (any node that holds it answers, else the leader: a follower
// names it); ?topic=&key=&max= finds a topic's messages by key, newest
// first, from this node's key index.
func (c *Console) messagesAPI(w http.ResponseWriter, r *http.Request) {
	if !c.guard(w, r) {
		return
	}
	if r.Method != http.MethodGet {
		methodNotAllowed(w, "GET")
		return
	}
	q, cred := r.URL.Query(), r.Header.Get(CredentialHeader)
	if id := q.Get("id"); id != "" {
		if _, _, err := broker.ParseMessageID(id); err != nil {
			c.fail(w, fmt.Errorf("%w: message id %.80q: %w", errBadRequest, id, err))
			return
		}
		if err := c.checkCall(cred, methodLookup, nil, r); err != nil {
			c.fail(w, err)
			return
		}
		res, err := c.cfg.Broker.LookupMessage(r.Context(), id)
		if err != nil {
			c.fail(w, err)
			return
		}
		m := shown(res.Message, res.ServedBy)
		m.Pending, m.DeliverAt = res.Pending, res.DeliverAt
		writeJSON(w, http.StatusOK, []ShownMessage{m})
		return
	}
	topic, key := q.Get("topic"), q.Get("key")
	if err := store.ValidateName("topic", topic); err != nil {
		c.fail(w, fmt.Errorf("%w: give id=, or topic= and key=: %w", errBadRequest, err))
		return
	}
	max := 20
	if s := q.Get("max"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxFound {
			c.fail(w, fmt.Errorf("%w: max=%.20q: want 1..%d", errBadRequest, s, maxFound))
			return
		}
		max = n
	}
	if err := c.checkCall(cred, methodFind, []auth.Need{{Action: auth.Subscribe, Resource: auth.Topic(topic)}}, r); err != nil {
		c.fail(w, err)
		return
	}
	ms, err := c.cfg.Broker.FindMessages(broker.FindRequest{Topic: topic, Key: key, Max: max})
	if err != nil {
		c.fail(w, err)
		return
	}
	out := make([]ShownMessage, 0, len(ms))
	for _, m := range ms {
		out = append(out, shown(m, c.cfg.Broker.ID()))
	}
	writeJSON(w, http.StatusOK, out)
}
