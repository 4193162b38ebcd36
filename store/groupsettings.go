package store

import (
	"context"
	"fmt"
	"sort"
)

// A consumer group's max reconsume times (RocketMQ's retryMaxTimes) is
// replicated state: the leader that decides whether a sent-back message goes
// to %RETRY%<group> or %DLQ%<group> reads it, so every node must hold the
// same value, across leader changes and in snapshots.

// opSetMaxReconsume sets a group's max reconsume times.
const opSetMaxReconsume = "set_max_reconsume"

// MaxReconsumeLimit is the largest max reconsume times a group may have
// (api.MaxMaxReconsumeTimes; store does not import api).
const MaxReconsumeLimit = 64

// EncodeSetMaxReconsume encodes a command that sets a group's max
// reconsume times (0..MaxReconsumeLimit).
func EncodeSetMaxReconsume(group string, n int32) []byte {
	return encodeMeta(&metaCmd{Op: opSetMaxReconsume, Group: group, MaxReconsume: &n})
}

func (f *FSM) applySetMaxReconsumeLocked(c *metaCmd) interface{} {
	if err := ValidateName("group", c.Group); err != nil {
		return err
	}
	if c.MaxReconsume == nil || *c.MaxReconsume < 0 || *c.MaxReconsume > MaxReconsumeLimit {
		return fmt.Errorf("max reconsume times of group %q: want 0..%d", c.Group, MaxReconsumeLimit)
	}
	f.maxReconsume[c.Group] = *c.MaxReconsume
	return nil
}

// MaxReconsumeTimes returns a group's max reconsume times and whether it
// was set (false: the caller's default applies).
func (f *FSM) MaxReconsumeTimes(group string) (int32, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	n, ok := f.maxReconsume[group]
	return n, ok
}

// SettingsGroups lists the groups with settings, sorted.
func (f *FSM) SettingsGroups() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, 0, len(f.maxReconsume))
	for g := range f.maxReconsume {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// SetMaxReconsumeTimes replicates a group's max reconsume times.
func (s *Store) SetMaxReconsumeTimes(ctx context.Context, group string, max int32) error {
	if err := s.applyMeta(ctx, EncodeSetMaxReconsume(group, max)); err != nil {
		return fmt.Errorf("set max reconsume times of group %q: %w", group, err)
	}
	return nil
}

// MaxReconsumeTimes returns a group's max reconsume times and whether it
// was set.
func (s *Store) MaxReconsumeTimes(group string) (int32, bool) { return s.fsm.MaxReconsumeTimes(group) }

// SettingsGroups lists the groups with settings, sorted.
func (s *Store) SettingsGroups() []string { return s.fsm.SettingsGroups() }
