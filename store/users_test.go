package store

import (
	"bufio"
	"bytes"
	"encoding/gob"
	"errors"
	"hash/crc32"
	"io"
	"os"
	"testing"
)

// TestUsersReplicatedAndSnapshotted: the user table changes only by its
// commands, refuses what it cannot hold (nothing changed), and a snapshot
// carries it with the sealed secrets as they were given.
func TestUsersReplicatedAndSnapshotted(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeUserAdd("u1", []byte("sealed-1")))
	if err, _ := h.apply(EncodeUserAdd("u1", []byte("other"))).(error); !errors.Is(err, ErrUserExists) {
		t.Fatalf("second add: %v, want ErrUserExists", err)
	}
	if err, _ := h.apply(EncodeUserAdd("bad name", []byte("x"))).(error); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("add bad name: %v, want ErrInvalidName", err)
	}
	if err, _ := h.apply(EncodeUserAdd("u2", nil)).(error); err == nil {
		t.Fatal("add without a secret applied")
	}
	if err, _ := h.apply(EncodeUserGrant("nobody", "topic:a", 1)).(error); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("grant to unknown: %v, want ErrUnknownUser", err)
	}
	if err, _ := h.apply(EncodeUserGrant("u1", "topic:a", 8)).(error); err == nil {
		t.Fatal("grant of an unknown action bit applied")
	}
	h.mustMeta(EncodeUserGrant("u1", "topic:orders*", 1))
	h.mustMeta(EncodeUserGrant("u1", "topic:orders*", 2))
	h.mustMeta(EncodeUserGrant("u1", "group:g1", 2))
	h.mustMeta(EncodeUserRevoke("u1", "topic:orders*", 1))
	h.mustMeta(EncodeUserPasswd("u1", []byte("sealed-2")))
	h.mustMeta(EncodeUserAdd("u3", []byte("s3")))
	h.mustMeta(EncodeUserGrant("u3", "topic:x", 1))
	h.mustMeta(EncodeUserRevoke("u3", "topic:x", 7))
	h.mustMeta(EncodeUserAdd("gone", []byte("s")))
	h.mustMeta(EncodeUserRemove("gone"))
	if err, _ := h.apply(EncodeUserRemove("gone")).(error); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("second remove: %v, want ErrUnknownUser", err)
	}
	// A table with users ignores a bootstrap.
	h.mustMeta(EncodeUserBootstrap("admin", []byte("sa"), "cluster", 4))

	check := func(f *FSM) {
		t.Helper()
		us := f.Users()
		if len(us) != 2 || us[0].Name != "u1" || us[1].Name != "u3" {
			t.Fatalf("users %+v, want u1 and u3", us)
		}
		u, ok := f.User("u1")
		if !ok || string(u.Secret) != "sealed-2" {
			t.Fatalf("u1 %+v %v", u, ok)
		}
		want := []Grant{{"group:g1", 2}, {"topic:orders*", 2}}
		if len(u.Grants) != 2 || u.Grants[0] != want[0] || u.Grants[1] != want[1] {
			t.Fatalf("u1 grants %+v, want %+v", u.Grants, want)
		}
		if u3, _ := f.User("u3"); len(u3.Grants) != 0 {
			t.Fatalf("u3 grants %+v after revoking all", u3.Grants)
		}
		// Copies: changing one changes nothing held.
		u.Grants[0].Actions = 7
		if again, _ := f.User("u1"); again.Grants[0].Actions != 2 {
			t.Fatal("User returned the held grants")
		}
	}
	check(h.f)
	f2, _ := snapshotRoundTrip(t, h.f)
	check(f2)
}

// TestUserBootstrapOnlyOnEmptyTable: the first admin from the server's
// configuration is written only while no user exists.
func TestUserBootstrapOnlyOnEmptyTable(t *testing.T) {
	h := newHarness(t)
	h.mustMeta(EncodeUserBootstrap("root", []byte("s"), "cluster", 4))
	h.mustMeta(EncodeUserBootstrap("other", []byte("s"), "cluster", 4))
	us := h.f.Users()
	if len(us) != 1 || us[0].Name != "root" || len(us[0].Grants) != 1 || us[0].Grants[0] != (Grant{"cluster", 4}) {
		t.Fatalf("users %+v, want root alone with admin on cluster", us)
	}
}

// TestRestoreSnapshotsWithoutUsers: snapshots written before the user table
// (format 1 from testdata, and a format-4 one) restore with an empty table,
// replacing the users the node held.
func TestRestoreSnapshotsWithoutUsers(t *testing.T) {
	old, err := os.ReadFile("testdata/snapshot-format1.bin")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	hsum := crc32.New(castagnoli)
	bw := bufio.NewWriter(io.MultiWriter(&buf, hsum))
	if err := gob.NewEncoder(bw).Encode(&snapState{Format: 4, LogFloor: 9}); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	crc := hsum.Sum32()
	buf.Write([]byte{byte(crc >> 24), byte(crc >> 16), byte(crc >> 8), byte(crc)})
	for name, data := range map[string][]byte{"format 1": old, "format 4": buf.Bytes()} {
		h := newHarness(t)
		h.mustMeta(EncodeUserAdd("u1", []byte("s")))
		if err := h.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			t.Fatalf("%s: restore: %v", name, err)
		}
		if us := h.f.Users(); len(us) != 0 {
			t.Fatalf("%s: users %+v after restore, want none", name, us)
		}
		h.mustMeta(EncodeUserAdd("u1", []byte("s")))
	}
}
