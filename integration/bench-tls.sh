#!/usr/bin/env bash
# bench-tls.sh: produce throughput and sync latency of a local 3-process
# group with --tls-mode disabled against enforcing, alternating, in one
# session (docs/BENCHMARKS.md "TLS on against off").
#   integration/bench-tls.sh RAFTMQ_BINARY CERT_DIR [ROUNDS]
# CERT_DIR holds ca.pem and n1.pem/n1-key.pem.. n3 (docs/security.md).
set -euo pipefail
bin=$1 certs=$2 rounds=${3:-2}
work=$(mktemp -d)
pids=()
stop() { for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap 'stop; rm -rf "$work"' EXIT
peers=n1@127.0.0.1:27101,n2@127.0.0.1:27102,n3@127.0.0.1:27103
servers=127.0.0.1:29101,127.0.0.1:29102,127.0.0.1:29103
start() { # mode
	rm -rf "$work"/n*
	for i in 1 2 3; do
		local tls=()
		if [ "$1" != disabled ]; then
			tls=(--tls-mode "$1" --tls-cert "$certs/n$i.pem" --tls-key "$certs/n$i-key.pem" --tls-ca "$certs/ca.pem")
		fi
		"$bin" server --id n$i --data "$work/n$i" --raft 127.0.0.1:2710$i --listen 127.0.0.1:2910$i \
			--http 127.0.0.1:2810$i --peers $peers "${tls[@]}" 2>"$work/n$i.log" &
		pids+=($!)
	done
}
client() { # mode
	if [ "$1" != disabled ]; then echo --tls-ca "$certs/ca.pem"; fi
}
uptime
for r in $(seq "$rounds"); do
	for mode in disabled enforcing; do
		start $mode
		"$bin" health --all -s $servers --wait 30s $(client $mode) >/dev/null
		echo "== round $r, tls $mode: throughput (4 producers x window 256, 1 KiB)"
		"$bin" bench produce -s $servers $(client $mode) -d 15s -n 0 -t tput 2>/dev/null | tail -n 3
		echo "== round $r, tls $mode: sync latency (1 producer, window 1, 1 KiB)"
		"$bin" bench produce -s $servers $(client $mode) -d 10s -n 0 -P 1 -w 1 -t sync 2>/dev/null | tail -n 3
		stop
	done
done
