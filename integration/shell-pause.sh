#!/usr/bin/env bash
# A user's shell loop against a paused leader: one fresh `raftmq produce`
# process per message while the leader is SIGSTOPped for a few seconds,
# PAUSES times. Prints, per pause, the time from SIGSTOP to the first
# acknowledged write after it, and checks that the topic holds exactly the
# acknowledged messages.
#
#   integration/shell-pause.sh [PAUSES] [PAUSE_SECONDS]     (after make build)
#
# Runs three `raftmq server` processes of bin/raftmq on 127.0.0.1 in a
# temporary directory; they are killed by PID on exit.
set -euo pipefail

PAUSES=${1:-20}
HOLD=${2:-3}
BIN=${BIN:-bin/raftmq}
DIR=$(mktemp -d /tmp/raftmq-shell-XXXXXX)
BASE=$((21000 + RANDOM % 8000))
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done
	[ -n "${LOOP:-}" ] && kill "$LOOP" 2>/dev/null || true
	if [ -n "${KEEP:-}" ]; then echo "kept $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

peers="n1@127.0.0.1:$((BASE + 1)),n2@127.0.0.1:$((BASE + 2)),n3@127.0.0.1:$((BASE + 3))"
S="127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12)),127.0.0.1:$((BASE + 13))"
for i in 1 2 3; do
	env -u RAFTMQ_SERVERS "$BIN" server --id "n$i" --data "$DIR/n$i" --raft "127.0.0.1:$((BASE + i))" \
		--listen "127.0.0.1:$((BASE + 10 + i))" --http "" --peers "$peers" >"$DIR/n$i.log" 2>&1 &
	PIDS+=($!)
done
pid_of() { echo "${PIDS[$((${1#n} - 1))]}"; }
leader() { "$BIN" status -s "$S" --json 2>/dev/null | sed -n 's/.*"leader_id": *"\([^"]*\)".*/\1/p' | head -1; }
for _ in $(seq 100); do [ -n "$(leader)" ] && break; sleep 0.1; done
"$BIN" topic create -s "$S" shell --queues 4 >/dev/null

# The loop: one process per message; a line "NANOS BODY" per acknowledgement.
# It stops, after its current message, when $DIR/stop exists.
(
	i=0
	while [ ! -e "$DIR/stop" ]; do
		i=$((i + 1))
		if "$BIN" produce -s "$S" -t shell -k k "m$i" >/dev/null 2>>"$DIR/loop.err"; then
			echo "$(date +%s%N) m$i"
		else
			echo "FAILED m$i" >&2
		fi
	done
) >"$DIR/acks" 2>"$DIR/loop.fail" &
LOOP=$!
sleep 2

: >"$DIR/pauses"
for k in $(seq "$PAUSES"); do
	l=$(leader)
	if [ -z "$l" ]; then
		echo "pause $k: no node names a leader" >&2
		exit 1
	fi
	p=$(pid_of "$l")
	t0=$(date +%s%N)
	kill -STOP "$p"
	sleep "$HOLD"
	echo "$t0 $l->$(leader)" >>"$DIR/pauses"
	kill -CONT "$p"
	sleep 2 # rejoin and steady writes before the next pause
done
touch "$DIR/stop"
wait "$LOOP" 2>/dev/null || true
LOOP=

# Each pause is printed as OLD->NEW:WINDOW_MS (NEW: the leader named while
# OLD was paused). Window of a pause: the end of the longest gap between acknowledgements
# that ends after SIGSTOP (and before the next pause), minus the SIGSTOP time.
awk 'NR == FNR { t0[++n] = $1; who[n] = $2; next } { a[++m] = $1 }
END {
	for (k = 1; k <= n; k++) {
		lim = (k < n) ? t0[k+1] : t0[k] + 10e9
		best = 0; end = 0
		for (i = 2; i <= m; i++) if (a[i] > t0[k] && a[i] < lim && a[i] - a[i-1] > best) { best = a[i] - a[i-1]; end = a[i] }
		w[k] = (end - t0[k]) / 1e6; printf "%s:%.0f ", who[k], w[k]
	}
	printf "\n"
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (w[j] < w[i]) { t = w[i]; w[i] = w[j]; w[j] = t }
	med = (n % 2) ? w[(n + 1) / 2] : (w[n / 2] + w[n / 2 + 1]) / 2
	printf "pauses %d: window median %.0f ms, worst %.0f ms\n", n, med, w[n]
}' "$DIR/pauses" "$DIR/acks"

acked=$(wc -l <"$DIR/acks")
failed=$(grep -c FAILED "$DIR/loop.fail" || true)
sleep 1
stored=$("$BIN" topic describe -s "$S" shell --json | tr -d ' \n' | grep -o '"max_offset":[0-9]*' | cut -d: -f2 | paste -sd+ | bc)
echo "acknowledged $acked, failed $failed, stored $stored"
if [ "$stored" != "$acked" ] && [ "$failed" = 0 ]; then
	echo "MISMATCH: the topic holds $stored messages, $acked were acknowledged" >&2
	exit 1
fi
