package keyindex

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen: whatever bytes an index file holds (a torn write, disk rot),
// Open and Lookup neither panic nor loop; the file is either used or
// dropped.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	x, _ := Open(dir, Options{Slots: 4, Entries: 8})
	for i := uint64(1); i < 6; i++ {
		x.Add(i, 0, "t", "k")
		x.Done(i)
	}
	x.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "*.idx"))
	seed, _ := os.ReadFile(names[0])
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000001.idx"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		x, err := Open(dir, Options{Slots: 4, Entries: 8})
		if err != nil {
			return
		}
		defer x.Close()
		x.Lookup("t", "k", 100)
		if err := x.Add(x.Next()+1, 0, "t", "k"); err != nil {
			t.Fatal(err)
		}
		x.Lookup("t", "k", 100)
	})
}
