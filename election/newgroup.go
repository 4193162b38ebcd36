package election

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// Recovering a node's data as a new one-node group (Config.NewGroup).
//
// A copy of one node's data directory holds the group's whole log (raft
// never compacts it: it is the message store) and a raft configuration
// naming the group's old voters. Started as it is, the node would wait for
// those voters forever. NewGroup makes it the only voter first: one
// configuration entry, this node alone at its id and advertised raft
// address, is appended to the log after the last entry, with that entry's
// term. raft reads the latest configuration from the log entries after the
// snapshot when it starts, so the node starts as the single voter, elects
// itself, and commits the new entry with its first entry as leader.
//
// raft.RecoverCluster is not used: it deletes the whole log after taking a
// snapshot, and with it every message.

// ErrNothingToRecover is Start's error when Config.NewGroup is set and the
// stores hold no state.
var ErrNothingToRecover = errors.New("no raft state to recover as a new group: the data directory holds no log (start the copy of a node's data directory)")

// ErrRecoveredBefore is Start's error when Config.NewGroup and
// Config.NewGroupDone are set and the group has other members.
var ErrRecoveredBefore = errors.New("this node was recovered as a new group before and its group has other members since: a start with the flag again would leave them out")

// Recovered describes what rewriteAsNewGroup did.
type Recovered struct {
	Index, Term uint64        // of the appended configuration entry; 0 when none was needed
	Previous    []raft.Server // the voters and non-voters before it
}

// rewriteAsNewGroup appends a configuration entry making id at addr the
// only voter.
// With done (recovered before) it refuses when others are members.
func rewriteAsNewGroup(st RaftStores, id, addr string, done bool) (Recovered, error) {
	var rec Recovered
	last, err := st.Log.LastIndex()
	if err != nil {
		return rec, fmt.Errorf("read last log index: %w", err)
	}
	var base raft.Log
	if last > 0 {
		if err := st.Log.GetLog(last, &base); err != nil {
			return rec, fmt.Errorf("read last log entry %d: %w", last, err)
		}
	}
	snaps, err := st.Snapshots.List()
	if err != nil {
		return rec, fmt.Errorf("list snapshots: %w", err)
	}
	var prev raft.Configuration
	prevIndex := uint64(0)
	if len(snaps) > 0 {
		prev, prevIndex = snaps[0].Configuration, snaps[0].ConfigurationIndex
		if snaps[0].Index > base.Index { // no entry after the snapshot
			base = raft.Log{Index: snaps[0].Index, Term: snaps[0].Term}
		}
	}
	if base.Index == 0 {
		return rec, ErrNothingToRecover
	}
	// The latest configuration in the log, as raft would find it.
	first, err := st.Log.FirstIndex()
	if err != nil {
		return rec, fmt.Errorf("read first log index: %w", err)
	}
	from := max(first, prevIndex+1)
	for i := last; i >= from && i > 0; i-- {
		var e raft.Log
		if err := st.Log.GetLog(i, &e); err != nil {
			return rec, fmt.Errorf("read log entry %d: %w", i, err)
		}
		if e.Type == raft.LogConfiguration {
			prev = raft.DecodeConfiguration(e.Data)
			break
		}
	}
	rec.Previous = prev.Servers
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}}}
	if len(prev.Servers) == 1 && prev.Servers[0] == conf.Servers[0] {
		return rec, nil // already this node alone: a second start with the flag adds nothing
	}
	if done {
		return rec, fmt.Errorf("%w (members: %v)", ErrRecoveredBefore, describeServers(prev.Servers))
	}
	term, err := st.Stable.GetUint64([]byte("CurrentTerm")) // raft's key
	if err != nil && err.Error() != "not found" {           // raft's own test
		return rec, fmt.Errorf("read current term: %w", err)
	}
	if term < base.Term {
		if err := st.Stable.SetUint64([]byte("CurrentTerm"), base.Term); err != nil {
			return rec, fmt.Errorf("write current term: %w", err)
		}
	}
	e := raft.Log{Index: base.Index + 1, Term: base.Term, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(conf)}
	if err := st.Log.StoreLog(&e); err != nil {
		return rec, fmt.Errorf("append the new configuration at index %d: %w", e.Index, err)
	}
	rec.Index, rec.Term = e.Index, e.Term
	return rec, nil
}

// describeServers is servers as "id@addr (suffrage)", for the log.
func describeServers(servers []raft.Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = fmt.Sprintf("%s@%s (%s)", s.ID, s.Address, s.Suffrage)
	}
	return out
}
