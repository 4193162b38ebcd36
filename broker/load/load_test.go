package load

import (
	"math"
	"runtime"
	"testing"
)

func TestParseCPUMax(t *testing.T) {
	cases := []struct {
		in   string
		want float64
		ok   bool
	}{
		{"60000 100000\n", 0.6, true},
		{"200000 100000", 2, true},
		{"max 100000", 0, false},
		{"-1 100000", 0, false}, // cgroup v1: no quota
		{"", 0, false},
		{"abc 100000", 0, false},
	}
	for _, c := range cases {
		got, ok := parseCPUMax(c.in)
		if ok != c.ok || math.Abs(got-c.want) > 1e-9 {
			t.Errorf("parseCPUMax(%q) = %v %v, want %v %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestSameHost(t *testing.T) {
	cases := []struct {
		self   string
		others []string
		want   int
	}{
		{"127.0.0.1:9001", []string{"127.0.0.1:9002", "127.0.0.1:9003"}, 3},
		{"localhost:9001", []string{"127.0.0.2:9002", "[::1]:9003"}, 3},
		{"n1:9000", []string{"n2:9000", "n3:9000"}, 1}, // compose: one node per container
		{"10.0.0.1:9000", []string{"10.0.0.1:9001", "10.0.0.2:9000"}, 2},
		{"0.0.0.0:9000", []string{"0.0.0.0:9001"}, 1}, // no host named: counts only itself
		{":9000", []string{":9001"}, 1},
	}
	for _, c := range cases {
		if got := SameHost(c.self, c.others); got != c.want {
			t.Errorf("SameHost(%q, %v) = %d, want %d", c.self, c.others, got, c.want)
		}
	}
}

// TestLoadBudget: co-located nodes split the machine's cores; brokers of
// one process split the process's limit; a fixed budget wins.
func TestLoadBudget(t *testing.T) {
	l := New(0, nil, func() int { return 2 })
	l.limit = 8
	inProc := 2.0
	cores := float64(runtime.NumCPU())
	l.SetSharing(3)
	if want := min(8/inProc, cores/3); math.Abs(l.budget()-want) > 1e-9 {
		t.Errorf("3 nodes on the host: budget %v, want %v", l.budget(), want)
	}
	l.SetSharing(1)
	l.limit = 0.6 // a container limited to 0.6 CPU
	if want := min(0.6/inProc, cores); math.Abs(l.budget()-want) > 1e-9 {
		t.Errorf("cgroup-limited: budget %v, want %v", l.budget(), want)
	}
	l.fixed = 1.5
	if l.budget() != 1.5 {
		t.Errorf("fixed budget: %v", l.budget())
	}
}
