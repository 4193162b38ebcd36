#!/usr/bin/env bash
# The fixed benchmark suite of raftmq (`make bench`).
#
# Builds bin/raftmq, starts a local group of 3 `raftmq server` processes on
# 127.0.0.1 (raft-wal, fsync on every commit, default settings), runs
#   (a) 1 producer, synchronous, 1 KiB
#   (b) 4 producers x 256 in flight, 1 KiB
#   (c) the same with 100 B bodies
#   (e) client-side batching: 4 producers x 8 in flight x 64 messages, 1 KiB
#   (d) consume of everything produced: leader only, then with follower reads
# reads each server's peak RSS, stops the servers (by PID) and writes the
# results, the machine and the exact commands into docs/BENCHMARKS.md between
# the "suite" markers (the rest of that file is left alone).
#
# Knobs (environment): BENCH_DURATION (per produce case, default 20s),
# BENCH_SYNC_DURATION (case a, default 15s), BENCH_OUT (default
# docs/BENCHMARKS.md; "-" prints to stdout only), BENCH_SERVER_FLAGS (extra
# flags for every server), BENCH_SECTION (name of the marked section to
# replace, default "suite"; e.g. "suite-relaxed" for a second configuration),
# BENCH_KEEP=1 keeps the data directory and server logs, BENCH_CASES (the
# cases to run, default "a b c e d1 d2 d3"), BENCH_RESULTS (a directory
# that receives each case's JSON, for integration/bench-compare.sh),
# BENCH_BIN (run this raftmq binary instead of building bin/raftmq: an A/B
# alternates the builds of two commits, e.g. /tmp/raftmq-old and -new).
# Needs: go, jq, curl. The whole suite takes about 3 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=${BENCH_DURATION:-20s}
SYNC_DUR=${BENCH_SYNC_DURATION:-15s}
OUT=${BENCH_OUT:-docs/BENCHMARKS.md}
SECTION_NAME=${BENCH_SECTION:-suite}
BIN=${BENCH_BIN:-bin/raftmq}
for tool in go jq curl; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (apt-get install -y $tool)" >&2; exit 1; }
done

if [[ -n "${BENCH_BIN:-}" ]]; then
  [[ -x "$BIN" ]] || { echo "bench: BENCH_BIN $BIN is not an executable" >&2; exit 1; }
  echo "== using $BIN ($("$BIN" version 2>/dev/null | head -1 || true))" >&2
else
  echo "== build" >&2
  CGO_ENABLED=0 go build -o "$BIN" ./cmd/raftmq
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/raftmq-bench.XXXXXX")
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ "${BENCH_KEEP:-}" == 1 ]]; then echo "bench: kept $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Ports: 12 consecutive free ports below the ephemeral range.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
BASE=""
for _ in $(seq 1 50); do
  b=$((17000 + RANDOM % 12000))
  ok=1
  for i in $(seq 0 11); do port_free $((b + i)) || { ok=0; break; }; done
  if [[ $ok == 1 ]]; then BASE=$b; break; fi
done
[[ -n "$BASE" ]] || { echo "bench: no 12 free ports found" >&2; exit 1; }
raft() { echo "127.0.0.1:$((BASE + $1))"; }
api() { echo "127.0.0.1:$((BASE + 3 + $1))"; }
http() { echo "127.0.0.1:$((BASE + 6 + $1))"; }
PEERS="n1@$(raft 1),n2@$(raft 2),n3@$(raft 3)"
SERVERS="$(api 1),$(api 2),$(api 3)"

echo "== machine" >&2
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
MEM=$(free -g | awk '/^Mem:/ {print $2 " GiB"}')
DISK=$(df -hT "$WORK" | awk 'NR==2 {print $1 " " $2 ", " $3 " total, " $5 " free"}')
GOVER=$(go version | cut -d' ' -f3-)
KERNEL=$(uname -r)
# One disk probe: 500 synchronous 4 KiB writes (what one small Raft append costs).
FSYNC=$(dd if=/dev/zero of="$WORK/probe" bs=4k count=500 oflag=dsync 2>&1 | awk '/copied/ {printf "%.2f ms", $(NF-3) * 1000 / 500}')
rm -f "$WORK/probe"

echo "== start 3 servers in $WORK (ports $BASE..$((BASE + 11)))" >&2
SERVER_FLAGS=${BENCH_SERVER_FLAGS:-}
SERVER_CMD=()
for i in 1 2 3; do
  # shellcheck disable=SC2086
  "$BIN" server --id "n$i" --data "$WORK/n$i" --raft "$(raft $i)" --listen "$(api $i)" --http "$(http $i)" \
    --peers "$PEERS" --log-level info $SERVER_FLAGS >"$WORK/n$i.log" 2>&1 &
  PIDS+=($!)
  SERVER_CMD+=("$BIN server --id n$i --data DIR/n$i --raft $(raft $i) --listen $(api $i) --http $(http $i) --peers $PEERS${SERVER_FLAGS:+ $SERVER_FLAGS}")
done
for _ in $(seq 1 300); do
  "$BIN" health -s "$(api 1)" >/dev/null 2>&1 && break
  sleep 0.1
done
"$BIN" health -s "$(api 1)" >&2
TERM0=$({ "$BIN" status -s "$SERVERS" --json || true; } | jq -r .term)

leader_id() { { "$BIN" status -s "$SERVERS" --json || true; } | jq -r .leader_id; }
leader_http() {
  local id; id=$(leader_id)
  echo "$(http "${id#n}")"
}
# Group-commit totals of the leader: "entries requests bytes".
batch_totals() {
  curl -s "http://$(leader_http)/metrics" | awk '
    /^raftmq_batch_requests_count/ {c=$2} /^raftmq_batch_requests_sum/ {r=$2} /^raftmq_batch_bytes_sum/ {b=$2}
    END {printf "%.0f %.0f %.0f\n", c, r, b}'
}

# CPU seconds (user + system) used so far by the three servers.
TCK=$(getconf CLK_TCK)
server_cpu() {
  local t=0 pid f
  for pid in "${PIDS[@]}"; do
    f=$(cut -d')' -f2- "/proc/$pid/stat" 2>/dev/null) || continue
    t=$((t + $(echo "$f" | awk '{print $12 + $13}')))
  done
  echo "$t"
}

RESULTS=$WORK/results
mkdir -p "$RESULTS"
CMDS=()
# produce NAME ARGS...: runs one produce case, records JSON and group-commit stats.
produce() {
  local name=$1; shift
  local cmd="raftmq bench produce -s $SERVERS $* --json"
  CMDS+=("($name) $cmd")
  echo "== ($name) $cmd" >&2
  read -r e0 r0 b0 < <(batch_totals)
  local c0; c0=$(server_cpu)
  "$BIN" bench produce -s "$SERVERS" "$@" --json >"$RESULTS/$name.json" || echo "bench: case $name failed" >&2
  local c1; c1=$(server_cpu)
  read -r e1 r1 b1 < <(batch_totals)
  jq -n --argjson e $((e1 - e0)) --argjson r $((r1 - r0)) --argjson b $((b1 - b0)) --argjson cpu "$(((c1 - c0) * 1000 / TCK))" \
    '{entries: $e, reqs_per_entry: (if $e > 0 then $r / $e else 0 end), kib_per_entry: (if $e > 0 then $b / $e / 1024 else 0 end),
      server_cpu_seconds: ($cpu / 1000)}' >"$RESULTS/$name.batch.json"
  jq -r '"   \(.msgs_per_sec | floor) msg/s, \(.mb_per_sec * 10 | floor / 10) MB/s, p50 \(.latency.p50_ns / 1e6) ms, p99 \(.latency.p99_ns / 1e6) ms, errors \(.errors)"' \
    "$RESULTS/$name.json" >&2 || true
}
consume() {
  local name=$1; shift
  local cmd="raftmq bench consume -s $SERVERS $* --json"
  CMDS+=("($name) $cmd")
  echo "== ($name) $cmd" >&2
  local c0; c0=$(server_cpu)
  "$BIN" bench consume -s "$SERVERS" "$@" --json >"$RESULTS/$name.json" || echo "bench: case $name failed" >&2
  local c1; c1=$(server_cpu)
  jq -n --argjson cpu "$(((c1 - c0) * 1000 / TCK))" '{server_cpu_seconds: ($cpu / 1000)}' >"$RESULTS/$name.batch.json"
  jq -r '"   \(.msgs_per_sec | floor) msg/s, \(.mb_per_sec * 10 | floor / 10) MB/s, \(.messages) messages, followers \(.follower_share * 100 | floor)%"' \
    "$RESULTS/$name.json" >&2 || true
}

CASES=" ${BENCH_CASES:-a b c e d1 d2 d3} "
want() { [[ "$CASES" == *" $1 "* ]]; }
START=$(date +%s)
want a && produce a --topic bench-1k --size 1024 --producers 1 --window 1 --count 100000 --duration "$SYNC_DUR"
want b && produce b --topic bench-1k --size 1024 --producers 4 --window 256 --count 5000000 --duration "$DUR"
want c && produce c --topic bench-100b --size 100 --producers 4 --window 256 --count 10000000 --duration "$DUR"
want e && produce e --topic bench-1k-batch --size 1024 --producers 4 --window 8 --batch 64 --count 10000000 --duration "$DUR"
want d1 && consume d1 --topic bench-1k --consumers 4 --follower-reads=false --duration 40s
want d2 && consume d2 --topic bench-1k --consumers 4 --follower-reads=true --duration 40s
want d3 && consume d3 --topic bench-100b --consumers 4 --follower-reads=false --duration 40s
want c1 && consume c1 --topic bench-1k --consumers 1 --follower-reads=false --duration 40s
END=$(date +%s)
if [[ -n "${BENCH_RESULTS:-}" ]]; then mkdir -p "$BENCH_RESULTS" && cp "$RESULTS"/*.json "$BENCH_RESULTS"/; fi

LEADER=$(leader_id)
RSS=""
for i in 1 2 3; do
  pid=${PIDS[$((i - 1))]}
  hwm=$(awk '/^VmHWM:/ {printf "%.0f", $2 / 1024}' "/proc/$pid/status" 2>/dev/null || echo "?")
  role=follower; [[ "n$i" == "$LEADER" ]] && role=leader
  RSS+="| n$i | $role (at the end) | $hwm |"$'\n'
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
TERM1=$({ "$BIN" status -s "$SERVERS" --json || true; } | jq -r .term)
ELECTIONS=$((TERM1 - TERM0))

ms() { jq -r "$1 / 1e6 * 100 | round / 100" "$2"; }
# CPU µs per message: servers + bench client.
cpumsg() {
  jq -rs '.[0] as $r | .[1] as $b | if $r.messages > 0
    then "\(($b.server_cpu_seconds + $r.client_cpu_seconds) / $r.messages * 1e6 | round) (\($b.server_cpu_seconds / $r.messages * 1e6 | round) + \($r.client_cpu_seconds / $r.messages * 1e6 | round))"
    else "-" end' "$1" "$2"
}
prow() {
  local name=$1 label=$2 f=$RESULTS/$1.json bf=$RESULTS/$1.batch.json
  want "$name" || return 0
  [[ -s $f ]] || { echo "| $label | (failed) |||||||||||"; return; }
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" \
    "$(jq -r '.msgs_per_sec | round' "$f")" "$(jq -r '.mb_per_sec * 10 | round / 10' "$f")" \
    "$(ms .latency.p50_ns "$f")" "$(ms .latency.p90_ns "$f")" "$(ms .latency.p99_ns "$f")" \
    "$(ms .latency.p99_9_ns "$f")" "$(ms .latency.max_ns "$f")" \
    "$(jq -r '"\(.messages) / \(.seconds * 10 | round / 10) s"' "$f")" "$(jq -r .errors "$f")" \
    "$(jq -r '"\(.reqs_per_entry * 10 | round / 10) / \(.kib_per_entry | round) KiB"' "$bf")" \
    "$(jq -r .elections "$f")" "$(cpumsg "$f" "$bf")"
}
crow() {
  local name=$1 label=$2 f=$RESULTS/$1.json bf=$RESULTS/$1.batch.json
  want "$name" || return 0
  [[ -s $f ]] || { echo "| $label | (failed) ||||||||"; return; }
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" \
    "$(jq -r '.msgs_per_sec | round' "$f")" "$(jq -r '.mb_per_sec * 10 | round / 10' "$f")" \
    "$(jq -r '"\(.messages) of \(.available) / \(.seconds * 10 | round / 10) s"' "$f")" \
    "$(jq -r '"\(.from_leader) / \(.from_followers)"' "$f")" \
    "$(jq -r '[.served_by | to_entries[] | "\(.key) \(.value)"] | join(", ")' "$f")" \
    "$(ms .poll_latency.p50_ns "$f") / $(ms .poll_latency.p99_ns "$f")" "$(jq -r .elections "$f")" "$(cpumsg "$f" "$bf")"
}

SECTION=$WORK/section.md
{
  echo "<!-- $SECTION_NAME:begin (written by integration/bench.sh; edits here are overwritten) -->"
  if [[ -n "$SERVER_FLAGS" ]]; then echo "### Suite results with server flags \`$SERVER_FLAGS\`"; else echo "### Suite results (default server settings)"; fi
  echo
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC'), suite took $((END - START)) s."
  echo "Machine: $(nproc) vCPU ($CPU), $MEM RAM, disk $DISK; $GOVER; Linux $KERNEL."
  echo "Disk probe at the start: one synchronous 4 KiB write (dd oflag=dsync) took $FSYNC on average."
  echo "Load average (1/5/15 min) before: $LOAD_BEFORE, after: $LOAD_AFTER. The machine is shared; see the note at the top of this file."
  echo "Raft terms begun during the suite (elections; 0 = one stable leader): $ELECTIONS."
  echo
  echo "Produce (latency per Send call, send → ack, in ms; group commit = produce requests and KiB per Raft entry on the leader):"
  echo
  echo "| case | msg/s | MB/s | p50 | p90 | p99 | p99.9 | max | messages / time | errors | group commit | elections | CPU µs/msg (servers + client) |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  prow a "(a) 1 producer, synchronous, 1 KiB"
  prow b "(b) 4 producers × 256 in flight, 1 KiB"
  prow c "(c) 4 producers × 256 in flight, 100 B"
  prow e "(e) client batching: 4 × 8 in flight × 64 msgs, 1 KiB"
  echo
  echo "Consume (4 consumers, each pinned to one of the 4 queues, 1024 messages per pull):"
  echo
  echo "| case | msg/s | MB/s | messages / time | from leader / followers | served by | poll p50 / p99 ms | elections | CPU µs/msg (servers + client) |"
  echo "|---|---|---|---|---|---|---|---|---|"
  crow d1 "(d1) bench-1k (a+b), leader only"
  crow d2 "(d2) bench-1k (a+b), follower reads on"
  crow d3 "(d3) bench-100b (c), leader only"
  crow c1 "(c1) bench-1k (a+b), 1 consumer, leader only"
  echo
  echo "Peak RSS of each server (VmHWM at the end of the suite):"
  echo
  echo "| node | role | peak RSS MiB |"
  echo "|---|---|---|"
  printf '%s' "$RSS"
  echo
  echo "Commands (\`-s\` is the 3 servers' client addresses):"
  echo
  echo '```'
  for c in "${SERVER_CMD[@]}"; do echo "$c"; done
  for c in "${CMDS[@]}"; do echo "$c"; done
  echo '```'
  echo "<!-- $SECTION_NAME:end -->"
} >"$SECTION"

if [[ "$OUT" == "-" ]]; then
  cat "$SECTION"
  exit 0
fi
if [[ -f "$OUT" ]] && grep -q "<!-- $SECTION_NAME:begin" "$OUT"; then
  awk -v sec="$SECTION" -v b="<!-- $SECTION_NAME:begin" -v e="<!-- $SECTION_NAME:end -->" '
    index($0, b) == 1 {while ((getline l < sec) > 0) print l; skip=1; next}
    index($0, e) == 1 {skip=0; next}
    !skip {print}' "$OUT" >"$WORK/out.md"
  cp "$WORK/out.md" "$OUT"
else
  { [[ -f "$OUT" ]] && cat "$OUT" && echo; cat "$SECTION"; } >"$WORK/out.md"
  cp "$WORK/out.md" "$OUT"
fi
cat "$SECTION"
echo "bench: wrote $OUT" >&2
