package store

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// fsmDamage is the damaged entry that stopped the FSM (at 0: none).
type fsmDamage struct {
	at     atomic.Uint64
	mu     sync.Mutex
	err    error
	notify func(index uint64, err error)
	told   bool
}

// OnDamaged registers fn to be called once, after the apply that met a
// damaged entry (on raft's FSM goroutine; it must not block). Register it
// before raft starts.
func (f *FSM) OnDamaged(fn func(index uint64, err error)) {
	f.damage.mu.Lock()
	f.damage.notify = fn
	f.damage.mu.Unlock()
}

// Damaged returns the damaged entry this FSM stopped at and why (0, nil:
// none).
func (f *FSM) Damaged() (uint64, error) {
	f.damage.mu.Lock()
	defer f.damage.mu.Unlock()
	return f.damage.at.Load(), f.damage.err
}

// markDamagedLocked stops the FSM at entry index.
func (f *FSM) markDamagedLocked(index uint64, err error) error {
	err = fmt.Errorf("entry %d: %w: %w", index, ErrDamaged, err)
	f.damage.mu.Lock()
	if f.damage.at.Load() == 0 {
		f.damage.at.Store(index)
		f.damage.err = err
	}
	f.damage.mu.Unlock()
	f.log.Error("stopped applying at a damaged log entry; this node no longer serves, leads or snapshots",
		"index", index, "error", err)
	return err
}

func (d *fsmDamage) tell() {
	if d.at.Load() == 0 {
		return
	}
	d.mu.Lock()
	if d.told || d.notify == nil {
		d.mu.Unlock()
		return
	}
	d.told = true
	at, err, fn := d.at.Load(), d.err, d.notify
	d.mu.Unlock()
	fn(at, err)
}
