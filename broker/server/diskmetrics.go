package server

import (
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// diskEvery bounds how often a scrape walks the data directory.
const diskEvery = 10 * time.Second

// diskUsage is the bytes of each part of a node's data directory, walked
// at most every diskEvery.
type diskUsage struct {
	dir   string
	parts []string
	mu    sync.Mutex
	at    time.Time
	bytes map[string]int64
}

func (d *diskUsage) of(part string) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if time.Since(d.at) >= diskEvery {
		d.bytes = map[string]int64{}
		for _, p := range d.parts {
			filepath.WalkDir(filepath.Join(d.dir, p), func(_ string, e fs.DirEntry, err error) error {
				if err == nil && !e.IsDir() {
					if fi, ierr := e.Info(); ierr == nil {
						d.bytes[p] += fi.Size()
					}
				}
				return nil // a file deleted meanwhile is not an error
			})
		}
		d.at = time.Now()
	}
	return float64(d.bytes[part])
}

// registerDiskMetrics exports the bytes the log, the queue and key indexes
// and the snapshots take, and the space left on the data directory's file
// system.
func (s *Server) registerDiskMetrics() {
	d := &diskUsage{dir: s.cfg.DataDir, parts: []string{"log", "queueindex", "keyindex", "snapshots"}}
	reg := s.broker.Registry()
	for _, p := range d.parts {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_disk_bytes",
			Help:        "Bytes of the data directory's parts: log (the Raft log, the messages), queueindex, keyindex, snapshots (walked at most every 10 s).",
			ConstLabels: prometheus.Labels{"dir": p}}, func() float64 { return d.of(p) }))
	}
	statfs := func(f func(syscall.Statfs_t) uint64) func() float64 {
		return func() float64 {
			var st syscall.Statfs_t
			if syscall.Statfs(s.cfg.DataDir, &st) != nil {
				return 0
			}
			return float64(f(st))
		}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_disk_free_bytes",
			Help: "Bytes available to this node on the data directory's file system."},
			statfs(func(st syscall.Statfs_t) uint64 { return st.Bavail * uint64(st.Bsize) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "raftmq_disk_size_bytes",
			Help: "Size of the data directory's file system."},
			statfs(func(st syscall.Statfs_t) uint64 { return st.Blocks * uint64(st.Bsize) })),
	)
}
