// Package namesrv is raftmq's name server: RocketMQ's NameServer role over
// the remoting protocol. Broker nodes register (REGISTER_BROKER) with every
// name server they are given, periodically and at once on a role change;
// clients ask for a topic's route (GET_ROUTEINFO_BY_TOPIC). A registration
// that is not renewed within the expiry is dropped.
//
// It keeps no state beyond the registrations it holds in memory: several
// name servers are independent, and a restarted one is whole again after
// one registration period. Per group (RocketMQ's brokerName) the route lists
// the leader as brokerId 0 and the followers under the ids they registered;
// when two live registrations claim one id, the one of the higher Raft term
// wins, so a dead leader's entry is shadowed by its successor's at once,
// not after the expiry.
//
// With Config.Auth on (auth.go), a registration must carry the node
// credential derived from the nodes' auth key file, and every other
// request a RocketMQ signature of a user the nodes registered (their
// secrets sealed under that key, opened here with the same key) or the
// node credential.
//
// It also answers the admin tools' name server requests (topic lists by
// cluster, the system topic list, a topic's removal from the routes until
// it is registered again, its own settings); it keeps no KV config.
//
// It never imports the broker: it knows brokers only by what they register.
package namesrv
