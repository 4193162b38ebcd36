package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/store"
)

// GroupID is the group's id as this node knows it ("" when it does not):
// as applied from the log (store.SetGroupID), or, until this node has
// applied it since it started, as it recorded it when it last had
// (Config.GroupIDFile). A restarted node applies nothing before a leader
// tells it what is committed, and must still know its group. A client names
// the id in every call, and a node that knows another refuses the call
// (package grpcapi).
func (b *Broker) GroupID() string {
	if id := b.fsm.GroupID(); id != "" {
		return id
	}
	if p := b.knownGroup.Load(); p != nil {
		return *p
	}
	return ""
}

// loadGroupID reads the group id this node recorded (Config.GroupIDFile).
func (b *Broker) loadGroupID() {
	if b.cfg.GroupIDFile == "" {
		return
	}
	data, err := os.ReadFile(b.cfg.GroupIDFile)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	id := strings.TrimSpace(string(data))
	if err != nil || id == "" || len(id) > store.MaxGroupIDLen {
		b.log.Warn("ignoring the recorded group id: this node learns it again from the log", "file", b.cfg.GroupIDFile, "error", err, "content", id)
		return
	}
	b.knownGroup.Store(&id)
}

// recordGroupID writes the applied group id to Config.GroupIDFile when it
// is not recorded yet: written to a temporary file, synced, renamed.
func (b *Broker) recordGroupID() {
	id := b.fsm.GroupID()
	if id == "" || b.cfg.GroupIDFile == "" {
		return
	}
	if p := b.knownGroup.Load(); p != nil && *p == id {
		return
	}
	if err := writeSynced(b.cfg.GroupIDFile, []byte(id+"\n")); err != nil {
		b.log.Warn("recording the group id failed; the next state round tries again", "file", b.cfg.GroupIDFile, "error", err)
		return
	}
	b.knownGroup.Store(&id)
}

// writeSynced replaces the file at path with data, durably.
func writeSynced(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// nameGroup gives the group a random id when it has none. A ready leader
// runs it; the first id applied wins, so two leaders racing agree.
func (b *Broker) nameGroup() {
	if b.fsm.GroupID() != "" || b.node.Role() != election.Leader || !b.node.Ready() || !b.naming.CompareAndSwap(false, true) {
		return
	}
	defer b.naming.Store(false)
	var r [16]byte
	rand.Read(r[:])
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if err := b.w.SetGroupID(ctx, hex.EncodeToString(r[:])); err != nil {
		b.log.Warn("setting the group's id failed; the next state round tries again", "error", err)
		return
	}
	b.log.Info("the group has an id: clients name it in their calls", "id", b.fsm.GroupID())
}
