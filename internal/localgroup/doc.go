// Package localgroup runs a broker group as `raftmq server` processes on
// 127.0.0.1 and drives it by PID: start, SIGKILL, SIGSTOP/SIGCONT,
// SIGTERM, wipe, restart, and cut links through fault proxies
// (internal/faultproxy). `raftmq demo`, `raftmq bench --local`, the
// process tests in integration and the chaos suite start their groups
// with it.
//
// Launcher is the small interface a driver of a group offers (start, kill,
// pause, resume a node, its addresses, the leader, its data directory);
// Group offers it through AsLauncher, and internal/composegroup implements
// it for a docker compose project.
//
// It never reads a node's data or logs for a verdict and never decides
// what a test checks: it starts, stops and reports.
package localgroup
