// Package route owns raftmq's read routing: the policy (Suggest) that
// decides what a pull answers and which node the consumer's next pull goes
// to, the reasons it gives (Reason), and the view of the other nodes it
// decides from (NodeState, View).
//
// Suggest is a pure function of a RouteInput; the broker gathers that input
// once per pull. No routing decision is made anywhere else.
//
// It must never import the broker facade (github.com/raftmq/raftmq/broker)
// nor speak a wire protocol: the wire's SuggestionReason mirrors Reason, not
// the other way round.
package route
