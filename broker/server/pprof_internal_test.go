package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/raftmq/raftmq/acl"
	"github.com/raftmq/raftmq/broker/auth"
	"github.com/raftmq/raftmq/store"
)

type noUsers struct{}

func (noUsers) User(string) (store.User, bool) { return store.User{}, false }

// TestPprofGuard: with auth on, profiles answer loopback clients only;
// with auth disabled, anyone who reaches the HTTP port.
func TestPprofGuard(t *testing.T) {
	sealer, _ := acl.NewSealer(bytes.Repeat([]byte("k"), 32))
	ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
	for _, tc := range []struct {
		mode   acl.Mode
		remote string
		want   int
	}{
		{acl.Enforcing, "127.0.0.1:5000", http.StatusOK},
		{acl.Enforcing, "[::1]:5000", http.StatusOK},
		{acl.Enforcing, "10.0.0.7:5000", http.StatusForbidden},
		{acl.Permissive, "10.0.0.7:5000", http.StatusForbidden},
		{acl.Disabled, "10.0.0.7:5000", http.StatusOK},
	} {
		a, err := auth.New(auth.Config{Mode: tc.mode, Users: noUsers{}, Sealer: sealer})
		if err != nil {
			t.Fatal(err)
		}
		s := &Server{auth: a}
		r := httptest.NewRequest("GET", "/debug/pprof/", nil)
		r.RemoteAddr = tc.remote
		w := httptest.NewRecorder()
		s.pprofGuard(ok)(w, r)
		if w.Code != tc.want {
			t.Errorf("%s from %s: %d, want %d", tc.mode, tc.remote, w.Code, tc.want)
		}
	}
}
