package broker

import (
	"slices"

	"github.com/raftmq/raftmq/election"
	"github.com/raftmq/raftmq/raftlog"
)

// setBatchVersion lets this node's produce writes use the highest batch
// version that every server of servers (the group's configuration, voters
// and non-voters) has said it reads (NodeState.BatchReadVersion; a server
// never heard from reads version 1 only), and version 1 when servers is
// empty (the configuration could not be read). A node stops applying at
// the first entry it cannot decode, so a member that reads less, added or
// restarted on an older release, brings the writes back to the version it
// reads at the state loop's next round. It cannot make the later entries
// the log already holds readable to that member: once a group wrote a
// version, it takes only members that read it. The state loop is its only caller, every round on every node,
// so a node that becomes leader writes by what it heard as a follower.
func (b *Broker) setBatchVersion(servers []election.Server) {
	v := raftlog.BatchV1
	unheard := len(servers) == 0
	if len(servers) > 0 {
		reads := b.batchReadVersions(servers)
		v = raftlog.ReadByAll(reads)
		unheard = slices.Contains(reads, 0)
	}
	b.batchUnheard.Store(unheard)
	if prev := b.w.BatchVersion(); prev != v {
		b.log.Info("batch version written changes", "from", prev, "to", v)
		b.w.SetBatchVersion(v)
	}
}

// batchReadVersions is what each of servers last said it reads.
func (b *Broker) batchReadVersions(servers []election.Server) []uint32 {
	reads := make([]uint32, 0, len(servers))
	for _, s := range servers {
		if s.ID == b.cfg.NodeID {
			reads = append(reads, uint32(raftlog.ReadVersion))
			continue
		}
		var r uint32
		if p, ok := b.view.Get(s.ID); ok && !p.LastOK.IsZero() {
			r = p.State.BatchReadVersion
		}
		reads = append(reads, r)
	}
	return reads
}
