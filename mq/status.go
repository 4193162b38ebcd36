package mq

// Roles a StatusResponse gives a node besides raft's own (leader, follower,
// candidate): RoleDown for a member not heard from within five state
// periods (its last indexes are dropped as stale), RoleUnknown for one never
// heard from.
const (
	RoleDown    = "down"
	RoleUnknown = "unknown"
)
