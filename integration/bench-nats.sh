#!/usr/bin/env bash
# The alternative people would pick, measured on this machine with the cases of
# `make bench`: a three-node NATS JetStream cluster on 127.0.0.1, an R3 stream
# on file storage, publishers that wait for JetStream's acknowledgements.
# NATS_SYNC=always (default here) fsyncs on every write (`sync_interval:
# always`); NATS_SYNC=default keeps NATS's own default (acknowledged before
# fsync, synced every 2 minutes).
#
#   bash integration/bench-nats.sh               # ~2 min to build NATS the first time, then ~1 min of runs
#   NATS_MSGS=400000 NATS_SYNC=default bash integration/bench-nats.sh
#
# `make bench-nats` runs integration/bench-compare.sh, which runs this at both
# settings beside raftmq at both of its durability settings and prints one
# table. NATS_RESULTS=FILE also writes the figures there as "key value" lines.
#
# nats-server v2.15.3 and natscli v0.5.0 are built once with `go install` into
# $NATS_BIN (default ~/.cache/raftmq/nats). Nothing is written to docs/: the
# figures in docs/BENCHMARKS.md were copied from this output by hand.
#
# natscli's "--batch 256" is not a sliding window like raftmq's --window: each
# publisher sends 256 messages and then waits for all 256 acks. More clients
# do not raise NATS's rate here (8 clients gave the same figures as 4).
set -euo pipefail

NATS_BIN=${NATS_BIN:-$HOME/.cache/raftmq/nats}
MSGS_1K=${NATS_MSGS:-200000}
MSGS_100=$((MSGS_1K * 5 / 2))
SYNC_MSGS=${NATS_SYNC_MSGS:-8000}
BASE_PORT=${NATS_BASE_PORT:-14220}
SYNC=${NATS_SYNC:-always}
case "$SYNC" in
  always) SYNC_CONF="sync_interval: always" SYNC_LABEL="sync_interval always" ;;
  default) SYNC_CONF="" SYNC_LABEL="NATS's default sync_interval (2 min)" ;;
  *) echo "NATS_SYNC=$SYNC: want always or default" >&2; exit 2 ;;
esac
RESULTS=${NATS_RESULTS:-/dev/null}
: >"$RESULTS"

if [[ ! -x "$NATS_BIN/nats-server" || ! -x "$NATS_BIN/nats" ]]; then
  echo "building nats-server v2.15.3 and natscli v0.5.0 into $NATS_BIN (once)" >&2
  mkdir -p "$NATS_BIN"
  GOBIN="$NATS_BIN" CGO_ENABLED=0 go install github.com/nats-io/nats-server/v2@v2.15.3
  GOBIN="$NATS_BIN" CGO_ENABLED=0 go install github.com/nats-io/natscli/nats@v0.5.0
fi

DIR=$(mktemp -d /tmp/raftmq-bench-nats.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT

client() { echo $((BASE_PORT + $1)); }
route() { echo $((BASE_PORT + 2000 + $1)); }
monitor() { echo $((BASE_PORT + 4000 + $1)); }

for n in 1 2 3; do
  cat >"$DIR/n$n.conf" <<EOF
server_name: n$n
listen: 127.0.0.1:$(client $n)
http: 127.0.0.1:$(monitor $n)
jetstream { store_dir: "$DIR/n$n" ${SYNC_CONF:+, $SYNC_CONF} }
cluster {
  name: bench
  listen: 127.0.0.1:$(route $n)
  routes: [nats-route://127.0.0.1:$(route 1), nats-route://127.0.0.1:$(route 2), nats-route://127.0.0.1:$(route 3)]
}
EOF
  "$NATS_BIN/nats-server" -c "$DIR/n$n.conf" -l "$DIR/n$n.log" </dev/null >/dev/null 2>&1 &
  PIDS+=($!)
done

NATS=("$NATS_BIN/nats" --no-context --server "nats://127.0.0.1:$(client 1)" --timeout 30s)
for _ in $(seq 1 60); do
  "${NATS[@]}" server check jetstream >/dev/null 2>&1 && break
  sleep 0.5
done
"${NATS[@]}" server check jetstream >/dev/null || { echo "no JetStream cluster after 30 s; logs in $DIR" >&2; exit 1; }
want_always=false; [[ "$SYNC" == always ]] && want_always=true
for n in 1 2 3; do
  got=$(curl -s "http://127.0.0.1:$(monitor $n)/jsz?config=true" | tr -d ' \n' | { grep -o '"sync_always":[a-z]*' || true; } | cut -d: -f2)
  [[ "${got:-false}" == "$want_always" ]] || { echo "n$n reports sync_always=${got:-absent}, want $want_always" >&2; exit 1; }
done

STREAM=(--create --storage file --replicas 3 --maxbytes 8GB --no-progress)
# record KEY LINE: the msgs/sec of a stats line (and its P50 in ms as KEY_p50).
record() {
  local rate p50
  rate=$(grep -oE 'stats: [0-9,]+ msgs/sec' <<<"$2" | head -1 | tr -dc '0-9' || true)
  echo "$1 ${rate:-0}" >>"$RESULTS"
  p50=$(grep -oE 'P50:? [0-9,.]+us' <<<"$2" | head -1 | sed -E 's/^P50:? //' | tr -dc '0-9.' || true)
  [[ -n "$p50" ]] && echo "$1_p50 $(awk -v u="$p50" 'BEGIN {printf "%.3f", u / 1000}')" >>"$RESULTS"
  return 0
}
run() {
  local key=$1 label=$2; shift 2
  "${NATS[@]}" stream rm -f "$STREAM_NAME" >/dev/null 2>&1 || true
  local out; out=$("${NATS[@]}" "$@" 2>&1) || { echo "$out" >&2; exit 1; }
  local line; line=$(grep -E 'aggregated stats|publisher stats|consumer stats' <<<"$out" | sed 's/^ *//')
  printf '%-44s %s\n' "$label" "$line"
  record "$key" "$line"
}

echo "$("$NATS_BIN/nats-server" --version), natscli $("$NATS_BIN/nats" --version); 3 nodes, R3 file stream, $SYNC_LABEL"
STREAM_NAME=b1k run async1k "4 publishers x 256, 1 KiB, $MSGS_1K msgs" \
  bench js pub async bench.b1k --stream b1k "${STREAM[@]}" --clients 4 --batch 256 --size 1024 --msgs "$MSGS_1K"
line=$("${NATS[@]}" bench js ordered --stream b1k --clients 1 --batch 500 --size 1024 --msgs "$MSGS_1K" --no-progress 2>&1 | grep 'consumer stats' | sed 's/^ *//')
printf '%-44s %s\n' "1 ordered consumer reads the 1 KiB stream" "$line"
record read1k "$line"
STREAM_NAME=b100 run async100 "4 publishers x 256, 100 B, $MSGS_100 msgs" \
  bench js pub async bench.b100 --stream b100 "${STREAM[@]}" --clients 4 --batch 256 --size 100 --msgs "$MSGS_100"
STREAM_NAME=bsync run sync1k "1 synchronous publisher, 1 KiB, $SYNC_MSGS msgs" \
  bench js pub sync bench.bsync --stream bsync "${STREAM[@]}" --clients 1 --size 1024 --msgs "$SYNC_MSGS"
