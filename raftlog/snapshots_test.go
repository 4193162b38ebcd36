package raftlog

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hashicorp/raft"
)

// makeSnapshot writes a snapshot of the given state covering index.
func makeSnapshot(t *testing.T, s *Stores, index uint64, state string) string {
	t.Helper()
	sink, err := s.Snapshots.Create(1, index, 1, raft.Configuration{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte(state)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

// checkOK is a stand-in for the FSM's checks: a state must start with "ok".
func checkOK(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(b, []byte("ok")) {
		return errors.New("not ok")
	}
	return nil
}

// TestCheckSnapshots covers the start-up check of snapshots behind the
// defects "a node whose newest snapshot is damaged refuses with raft's
// message and no repair steps" and "with retention it panics with log not
// found": a damaged snapshot is moved aside only when an older snapshot and
// the log hold all it summarised, and the node is refused otherwise.
func TestCheckSnapshots(t *testing.T) {
	const older, newer = 40, 80
	cases := []struct {
		name        string
		first, last uint64 // the log after deleting its head (0: empty)
		damage      map[uint64]string
		want        error
		moved       []uint64
	}{
		{"none damaged", 1, 100, nil, nil, nil},
		{"newest damaged, log covers from the older", 30, 100, map[uint64]string{newer: "crc"}, nil, []uint64{newer}},
		{"newest damaged, log starts just after the older", older + 1, 100, map[uint64]string{newer: "crc"}, nil, []uint64{newer}},
		{"newest damaged, retention gap", older + 2, 100, map[uint64]string{newer: "crc"}, ErrDamagedSnapshot, nil},
		{"newest damaged, log ends before it", 1, 70, map[uint64]string{newer: "crc"}, ErrDamagedSnapshot, nil},
		{"newest damaged, empty log", 0, 0, map[uint64]string{newer: "crc"}, ErrDamagedSnapshot, nil},
		{"older damaged", 60, 100, map[uint64]string{older: "crc"}, nil, []uint64{older}},
		{"all damaged, log from 1", 1, 100, map[uint64]string{older: "crc", newer: "state"}, nil, []uint64{older, newer}},
		{"all damaged, log from 2", 2, 100, map[uint64]string{older: "crc", newer: "crc"}, ErrDamagedSnapshot, nil},
		{"newest metadata damaged, retention gap", 60, 100, map[uint64]string{newer: "meta"}, ErrDamagedSnapshot, nil},
		{"newest metadata damaged, log covers", 30, 100, map[uint64]string{newer: "meta"}, nil, []uint64{newer}},
		{"newest fails the FSM's checks, retention gap", 60, 100, map[uint64]string{newer: "state"}, ErrDamagedSnapshot, nil},
		{"newest fails the FSM's checks, log covers", 30, 100, map[uint64]string{newer: "state"}, nil, []uint64{newer}},
		{"log gap after a healthy snapshot", newer + 2, 100, nil, ErrLostEntries, nil},
		{"healthy snapshot, empty log", 0, 0, nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if tc.last > 0 {
				writeEntries(t, s, 1, int(tc.last))
				if tc.first > 1 {
					if err := s.Log.DeleteRange(1, tc.first-1); err != nil {
						t.Fatal(err)
					}
				}
			}
			ids := map[uint64]string{}
			for _, idx := range []uint64{older, newer} {
				state := "ok state"
				if tc.damage[idx] == "state" {
					state = "bad state" // raft's CRC64 fits: only the FSM's checks see it
				}
				ids[idx] = makeSnapshot(t, s, idx, state)
			}
			for idx, how := range tc.damage {
				p := filepath.Join(s.snapDir, ids[idx])
				switch how {
				case "crc":
					b, err := os.ReadFile(filepath.Join(p, "state.bin"))
					if err != nil {
						t.Fatal(err)
					}
					b[3] ^= 0x10
					if err := os.WriteFile(filepath.Join(p, "state.bin"), b, 0o644); err != nil {
						t.Fatal(err)
					}
				case "meta":
					if err := os.WriteFile(filepath.Join(p, "meta.json"), []byte(`{"Version":1,"ID":`), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}

			snaps, checkErr := s.CheckSnapshots(checkOK)
			if !errors.Is(checkErr, tc.want) || (tc.want == nil) != (checkErr == nil) {
				t.Fatalf("CheckSnapshots: %v, want %v", checkErr, tc.want)
			}
			t.Log(checkErr)
			if checkErr != nil && !NeedsRepair(checkErr) {
				t.Errorf("a refusal is not one that needs repair: %v", checkErr)
			}
			if len(snaps) != 2 || snaps[0].Index != newer || snaps[1].Index != older {
				t.Fatalf("snapshots %+v: want %d then %d", snaps, newer, older)
			}
			var moved []uint64
			for _, sn := range snaps {
				if (sn.Err != nil) != (tc.damage[sn.Index] != "") {
					t.Errorf("snapshot %s: error %v, damage %q", sn.ID, sn.Err, tc.damage[sn.Index])
				}
				if sn.MovedTo == "" {
					continue
				}
				moved = append(moved, sn.Index)
				if _, err := os.Stat(filepath.Join(sn.MovedTo, "state.bin")); err != nil || filepath.Dir(sn.MovedTo) != filepath.Join(dir, "damaged") {
					t.Errorf("moved to %s: %v", sn.MovedTo, err)
				}
			}
			sort.Slice(moved, func(i, j int) bool { return moved[i] < moved[j] })
			if len(moved) != len(tc.moved) || (len(moved) > 0 && !equalIndexes(moved, tc.moved)) {
				t.Fatalf("moved aside %v, want %v", moved, tc.moved)
			}
			// What is left is what raft lists, all of it restorable; a
			// refusal leaves every snapshot in place.
			left, _ := os.ReadDir(s.snapDir)
			if want := 2 - len(tc.moved); len(left) != want {
				t.Errorf("%d snapshot directories left, want %d", len(left), want)
			}
			listed, err := s.Snapshots.List()
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range listed {
				if tc.want == nil && tc.damage[m.Index] != "" {
					t.Errorf("raft still lists damaged snapshot %s", m.ID)
				}
			}
			// A second check at the next start finds the same.
			again, err2 := s.CheckSnapshots(checkOK)
			if (checkErr == nil) != (err2 == nil) {
				t.Fatalf("second check: %v, first %v", err2, checkErr)
			}
			for _, sn := range again {
				if sn.MovedTo != "" {
					t.Errorf("second check moved %s", sn.ID)
				}
			}
		})
	}
}

func equalIndexes(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
