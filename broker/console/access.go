package console

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/api"
	"github.com/raftmq/raftmq/broker"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/mq"
)

// What the pages beyond the overview read and change is what the gRPC API
// serves, and each is checked as the gRPC call of the same name: the page
// signs a call credential (mq.SignCall's scheme, docs/security.md) for that
// call's method, the node checks it with the same Authorizer and the same
// needs. Changes carry it in the CredentialHeader; a stream, which a
// browser opens without headers, in its query parameter "cred".
const (
	CredentialHeader = "Raftmq-Credential"

	methodRead        = api.Broker_ListTopics_FullMethodName
	methodCreateTopic = api.Broker_CreateTopic_FullMethodName
	methodDeleteTopic = api.Broker_DeleteTopic_FullMethodName
	methodUpdateTopic = api.Broker_UpdateTopic_FullMethodName
)

var clusterAdmin = auth.Need{Action: auth.Admin, Resource: auth.ClusterResource}

// topicAdmin is what creating, changing or deleting a topic needs, as on the gRPC API.
func topicAdmin(topic string) []auth.Need {
	return []auth.Need{{Action: auth.Admin, Resource: auth.Topic(topic)}}
}

// checkCall checks the credential of one call (nil Auth: none asked).
func (c *Console) checkCall(cred, method string, needs []auth.Need, r *http.Request) error {
	return c.cfg.Auth.CheckCall(cred, method, needs, false, r.RemoteAddr)
}

// sameGroup reports whether a browser request comes from a page of this
// group: one served by this node or by another node of the group (the page
// moves to another node when its own dies). A request without an Origin
// (not from a browser's script) passes: its credential is what is checked.
// This keeps another site open in the operator's browser from changing
// topics of a group that asks no credentials.
func (c *Console) sameGroup(r *http.Request) (origin string, ok bool) {
	origin = r.Header.Get("Origin")
	if origin == "" {
		return "", true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return origin, false
	}
	if u.Host == r.Host {
		return origin, true
	}
	st, _ := c.cfg.Status()
	for _, n := range st.Nodes {
		if n.HTTPAddr != "" && sameHost(n.HTTPAddr, u.Host) {
			return origin, true
		}
	}
	return origin, false
}

func sameHost(a, b string) bool {
	if a == b {
		return true
	}
	ah, ap, err1 := net.SplitHostPort(a)
	bh, bp, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || ap != bp {
		return false
	}
	unspec := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ah == bh || unspec(ah) && (bh == "127.0.0.1" || bh == "localhost" || bh == "::1")
}

// guard answers a preflight and refuses a change from a page of another
// site; it returns false when the request is answered.
func (c *Console) guard(w http.ResponseWriter, r *http.Request) bool {
	origin, ok := c.sameGroup(r)
	if !ok {
		writeErr(w, http.StatusForbidden, errors.New("refused: the request comes from a page of another site ("+origin+"), not from this group's console"))
		return false
	}
	if origin != "" {
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Set("Vary", "Origin")
	}
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE")
		w.Header().Set("Access-Control-Allow-Headers", CredentialHeader+", Content-Type")
		w.Header().Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	return true
}

// Session is what /console/api/session answers: whether the node asks
// credentials, whose they are, and whether that user may change the
// group's topics (admin on the cluster): the page shows changes only then.
type Session struct {
	Auth  string `json:"auth"`
	User  string `json:"user,omitempty"`
	Admin bool   `json:"admin"`
	Error string `json:"error,omitempty"`
}

func (c *Console) session(w http.ResponseWriter, r *http.Request) {
	if !c.guard(w, r) {
		return
	}
	s := Session{Auth: c.cfg.Auth.Mode().String(), Admin: true}
	cred := r.Header.Get(CredentialHeader)
	if cred == "" && c.cfg.Auth.Mode() == acl.Enforcing {
		s.Admin, s.Error = false, "this node asks credentials: an access key and its secret key"
		writeJSON(w, http.StatusUnauthorized, s)
		return
	}
	if cred != "" {
		if err := c.checkCall(cred, methodRead, nil, r); err != nil {
			s.Admin, s.Error = false, err.Error()
			writeJSON(w, http.StatusUnauthorized, s)
			return
		}
		if cc, err := mq.ParseCallCredential(cred); err == nil {
			s.User = cc.AccessKey
			s.Admin = c.cfg.Auth.May(cc.AccessKey, clusterAdmin)
		}
	}
	writeJSON(w, http.StatusOK, s)
}

// apiError is the body of every refused request.
type apiError struct {
	Error string `json:"error"`
	// Leader and LeaderHTTP name the leader when this node is not it: the
	// page sends the change there.
	Leader     string `json:"leader,omitempty"`
	LeaderHTTP string `json:"leaderHttp,omitempty"`
}

// statusOf is the HTTP status of a broker error.
func statusOf(err error) int {
	var denied *auth.Denied
	switch {
	case errors.As(err, &denied):
		if denied.Reason == auth.ReasonNoPermission {
			return http.StatusForbidden
		}
		return http.StatusUnauthorized
	case errors.Is(err, broker.ErrInvalidArgument), errors.Is(err, broker.ErrOutOfRange):
		return http.StatusBadRequest
	case errors.Is(err, broker.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, broker.ErrAlreadyExists), errors.Is(err, broker.ErrFailedPrecondition):
		return http.StatusConflict
	case errors.Is(err, broker.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, broker.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, broker.ErrNotLeader), errors.Is(err, broker.ErrUnavailable), errors.Is(err, broker.ErrBusy),
		errors.Is(err, broker.ErrShutdown), errors.Is(err, broker.ErrUnknownOutcome):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// fail answers err; a NotLeaderError names the leader and its HTTP address.
func (c *Console) fail(w http.ResponseWriter, err error) {
	e := apiError{Error: err.Error()}
	var nl *broker.NotLeaderError
	if errors.As(err, &nl) {
		e.Leader = nl.LeaderID
		if st, serr := c.cfg.Status(); serr == nil {
			for _, n := range st.Nodes {
				if n.ID == nl.LeaderID {
					e.LeaderHTTP = n.HTTPAddr
				}
			}
		}
	}
	writeJSON(w, statusOf(err), e)
}

func writeErr(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, apiError{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// methodNotAllowed answers a method a path does not serve.
func methodNotAllowed(w http.ResponseWriter, allow ...string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeErr(w, http.StatusMethodNotAllowed, errors.New("method not allowed; allowed: "+strings.Join(allow, ", ")))
}
