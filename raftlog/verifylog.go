package raftlog

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// StartCheckFrom is the first log index a node verifies before it starts;
// the entries below it are left to VerifyInBackground and to the checked
// reads (guard.GetLog). snapshotIndex is the index of the snapshot raft
// will restore (0: none). The range from here to the end of the log is
// what start-up reads anyway or what could be torn:
//
//   - the entries after the snapshot: raft reads every one of them while
//     it starts (NewRaft scans them for configurations, and panics on a
//     read error) and the FSM applies them once the commit index is
//     known, so a damaged one must stop the start, not crash it;
//   - the entries above the watermark at open: written but not known to
//     have been fsynced, so possibly torn;
//   - after an unclean stop, raft-wal's whole tail segment: it recovered
//     that segment by reading its frame headers and checked only the
//     last commit's CRC.
//
// The range is bounded by the snapshot threshold and a segment, not by the
// size of the log.
func (s *Stores) StartCheckFrom(snapshotIndex uint64) uint64 {
	from := min(snapshotIndex, s.syncedAtOpen)
	if s.crashed && s.tailAtOpen > 0 {
		from = min(from, s.tailAtOpen-1)
	}
	return max(from+1, s.FirstIndex())
}

// VerifyRange is Verify of the entries from..to that the log holds (and
// the floor allows).
func (s *Stores) VerifyRange(from, to uint64, checkMeta func(data []byte) error) (checked uint64, err error) {
	first, err := s.raw.FirstIndex()
	if err != nil {
		return 0, fmt.Errorf("verify log: first index: %w", err)
	}
	last, err := s.raw.LastIndex()
	if err != nil {
		return 0, fmt.Errorf("verify log: last index: %w", err)
	}
	if first == 0 {
		return 0, nil
	}
	lo, hi := max(from, first, s.floor.Load()), min(to, last)
	var l raft.Log
	for i := lo; i <= hi; i++ {
		if err := s.checkEntry(i, &l, checkMeta); err != nil {
			if !errors.As(err, new(closingErr)) {
				s.guard.damage.report(i, err)
			}
			return checked, fmt.Errorf("verify log %d..%d: %w", lo, hi, err)
		}
		checked++
	}
	return checked, nil
}

// checkEntry reads entry i into l and checks it as Verify does, without
// reporting damage.
func (s *Stores) checkEntry(i uint64, l *raft.Log, checkMeta func(data []byte) error) error {
	if err := s.guard.check(i, l); err != nil {
		if errors.Is(err, raft.ErrLogNotFound) { // a hole inside the log
			return fmt.Errorf("%w: log entry %d: %w", ErrCorrupt, i, err)
		}
		return err
	}
	if l.Type != raft.LogCommand {
		return nil
	}
	switch CommandType(l.Data[0]) {
	case CmdBatch:
		b, err := ParseReadBatch(l.Data, 0) // CRC checked by check; no timestamps read
		if err == nil {
			err = b.Each(func(int, *RequestView) bool { return true })
		}
		if err != nil {
			return fmt.Errorf("log entry %d: %w", i, err)
		}
	default:
		if checkMeta != nil {
			if err := checkMeta(l.Data); err != nil {
				return fmt.Errorf("%w: log entry %d: %w", ErrCorrupt, i, err)
			}
		}
	}
	return nil
}

// BackgroundCheck configures VerifyInBackground.
type BackgroundCheck struct {
	// From and To bound the entries checked (inclusive), clamped to what
	// the log holds as the check goes.
	From, To uint64
	// BytesPerSecond paces the check by entry bytes read, so that it
	// shares the disk and a core with the node's work; 0: unpaced.
	BytesPerSecond int64
	// CheckMeta checks the non-batch raftmq commands, as for Verify.
	CheckMeta func(data []byte) error
	Logger    hclog.Logger
	// ProgressEvery is how often progress is logged at most; 0: 10 s.
	ProgressEvery time.Duration
	// Resume goes on from where the previous check of this directory
	// stopped (a restart in the middle), recorded in LOG_CHECKED as
	// progress is logged and at Close; a check that went through starts
	// over at From. Without it, a node restarted more often than a check
	// takes would check its oldest entries never.
	Resume bool
}

// checkedFile records the next entry the background check is to read.
const checkedFile = "LOG_CHECKED"

// CheckProgress is how far the background check has come.
type CheckProgress struct {
	From, To uint64 // the range it checks
	Next     uint64 // the next index it checks
	Entries  uint64 // entries checked
	Bytes    uint64 // entry bytes checked
	Started  time.Time
	Finished time.Time // zero while it runs
	// Done: it stopped for good: every entry checked, damage found, or
	// the rest of the range deleted meanwhile (retention). Not set when
	// Close stopped it.
	Done    bool
	Damaged uint64 // the damaged entry it found (0: none)
	Err     error  // why Damaged is damaged
}

// Fraction is the share of the range checked, 0..1 (1 once done).
func (p CheckProgress) Fraction() float64 {
	if p.Done {
		return 1
	}
	if p.To < p.From || p.Next <= p.From {
		return 0
	}
	return min(1, float64(p.Next-p.From)/float64(p.To-p.From+1))
}

// bgCheck is the background check of one Stores: one goroutine, stopped by
// Close before the log store closes.
type bgCheck struct {
	cfg  BackgroundCheck
	log  hclog.Logger
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu sync.Mutex
	p  CheckProgress
}

// VerifyInBackground checks the entries c.From..c.To as Verify does, on a
// goroutine of its own, paced at c.BytesPerSecond, logging its progress.
// A damaged entry is reported as a read that meets it would report it
// (Options.OnDamaged, Damaged), and the check ends there. Close stops it.
// It can be started once per Open, before Close.
func (s *Stores) VerifyInBackground(c BackgroundCheck) error {
	if s.bg.Load() != nil {
		return errors.New("verify the log in the background: already started")
	}
	if s.closers == nil {
		return errors.New("verify the log in the background: the stores are closed")
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 10 * time.Second
	}
	b := &bgCheck{cfg: c, log: c.Logger, stop: make(chan struct{}), done: make(chan struct{})}
	b.p = CheckProgress{From: c.From, To: c.To, Next: c.From, Started: time.Now()}
	s.bg.Store(b)
	s.closers = append(s.closers, func() error { b.close(); return nil })
	go b.run(s)
	return nil
}

// BackgroundProgress is the progress of the background check (false: none
// was started).
func (s *Stores) BackgroundProgress() (CheckProgress, bool) {
	b := s.bg.Load()
	if b == nil {
		return CheckProgress{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.p, true
}

func (b *bgCheck) close() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
}

// paceSlack is the least wait worth a timer: the check runs ahead of its
// pace by at most this much.
const paceSlack = 10 * time.Millisecond

func (b *bgCheck) run(s *Stores) {
	defer close(b.done)
	c := b.cfg
	last := s.LastIndex()
	hi := min(c.To, last)
	lo := max(c.From, s.FirstIndex())
	if s.FirstIndex() == 0 || lo > hi {
		b.finish(lo, "nothing to check")
		return
	}
	rate := "unpaced"
	if c.BytesPerSecond > 0 {
		rate = fmt.Sprintf("%.1f MB/s", float64(c.BytesPerSecond)/1e6)
	}
	checked := filepath.Join(s.dir, checkedFile)
	save := func(next uint64) {
		if !c.Resume {
			return
		}
		if err := writeWatermark(checked, next); err != nil {
			b.log.Warn("background log check: cannot record its progress; a restart checks from the start again", "error", err)
		}
	}
	if c.Resume {
		// A damaged or missing file only means checking more again.
		if next, err := readWatermark(checked); err == nil && next > lo && next <= hi {
			b.log.Info("background log check resumes where it stopped", "next", next, "from", lo)
			lo = next
		}
	}
	b.mu.Lock()
	b.p.Next = lo
	b.mu.Unlock()
	b.log.Info("checking the log in the background: reads check every entry they meet meanwhile", "from", lo, "to", hi,
		"entries", hi-lo+1, "pace", rate)
	start := time.Now()
	logged := start
	var l raft.Log
	var entries, bytes uint64
	for i := lo; i <= hi; i++ {
		select {
		case <-b.stop:
			save(i)
			b.log.Info("background log check stopped by shutdown", "next", i, "entries", entries, "mb", mb(bytes))
			return
		default:
		}
		if f := s.floor.Load(); i < f { // retention deleted these meanwhile
			if i = f; i > hi {
				break
			}
		}
		if err := s.checkEntry(i, &l, c.CheckMeta); err != nil {
			if errors.As(err, new(closingErr)) {
				return
			}
			// Deleted meanwhile (retention, or raft installing a
			// snapshot and clearing the log), or damaged?
			first, ferr := s.raw.FirstIndex()
			if now := s.LastIndex(); ferr == nil && now < i {
				break // a tail truncation: nothing of the range is left above
			}
			if ferr == nil && (first == 0 || i < first || i < s.floor.Load()) {
				if first == 0 || max(first, s.floor.Load()) > hi {
					break
				}
				i = max(first, s.floor.Load()) - 1
				continue
			}
			s.guard.damage.report(i, err)
			save(i) // found again at once after a restart
			b.mu.Lock()
			b.p.Next, b.p.Done, b.p.Finished, b.p.Damaged, b.p.Err = i, true, time.Now(), i, err
			b.mu.Unlock()
			b.log.Error("background log check found a damaged entry: this node stops serving, leading and campaigning",
				"index", i, "error", err, "entries_checked", entries)
			return
		}
		entries++
		bytes += uint64(len(l.Data))
		b.mu.Lock()
		b.p.Next, b.p.Entries, b.p.Bytes = i+1, entries, bytes
		b.mu.Unlock()
		if c.BytesPerSecond > 0 {
			due := start.Add(time.Duration(float64(bytes) / float64(c.BytesPerSecond) * float64(time.Second)))
			if wait := time.Until(due); wait > paceSlack {
				t := time.NewTimer(wait)
				select {
				case <-b.stop:
					t.Stop()
					save(i + 1)
					b.log.Info("background log check stopped by shutdown", "next", i+1, "entries", entries, "mb", mb(bytes))
					return
				case <-t.C:
				}
			}
		}
		if now := time.Now(); now.Sub(logged) >= c.ProgressEvery {
			logged = now
			save(i + 1)
			done := float64(i-lo+1) / float64(hi-lo+1) // of this run's part, for the ETA
			eta := time.Duration(float64(now.Sub(start)) * (1 - done) / done)
			b.mu.Lock()
			whole := b.p.Fraction()
			b.mu.Unlock()
			b.log.Info("background log check", "entries", entries, "mb", mb(bytes), "percent", math.Round(whole*1000)/10,
				"eta", eta.Round(time.Second), "index", i)
		}
	}
	b.finish(hi+1, "")
	if c.Resume {
		if err := os.Remove(checked); err != nil && !errors.Is(err, os.ErrNotExist) {
			b.log.Warn("background log check: cannot remove its progress record", "error", err)
		}
	}
	b.log.Info("background log check finished: no damaged entry", "entries", entries, "mb", mb(bytes),
		"took", time.Since(start).Round(time.Millisecond))
}

func (b *bgCheck) finish(next uint64, why string) {
	b.mu.Lock()
	b.p.Next, b.p.Done, b.p.Finished = next, true, time.Now()
	b.mu.Unlock()
	if why != "" {
		b.log.Debug("background log check: " + why)
	}
}

func mb(bytes uint64) float64 { return math.Round(float64(bytes)/1e5) / 10 }
