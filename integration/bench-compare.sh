#!/usr/bin/env bash
# raftmq against NATS JetStream on this machine, each at its two durability
# settings, in one run, as one table (`make bench-nats`):
#
#   NATS default        acknowledged before fsync, synced every 2 minutes
#   NATS always         sync_interval: always, an fsync on every write
#   raftmq quorum-fsync acknowledged once a quorum fsynced it (the default)
#   raftmq quorum-memory acknowledged once a quorum holds it, synced within
#                       --sync-interval (docs/durability.md); "-" when the
#                       binary has no --durability flag
#
# Workloads: one synchronous producer (1 KiB; msg/s and p50), 4 producers x
# 256 in flight (1 KiB and 100 B), one consumer reading the 1 KiB topic
# from the leader. Ratios are raftmq over NATS at equal durability (fsync
# against always, memory against default); for p50, NATS over raftmq, so
# above 1 means raftmq is ahead everywhere.
#
# Knobs: COMPARE_DURATION (each raftmq produce case, default 10s), NATS_MSGS
# and NATS_SYNC_MSGS (see bench-nats.sh), COMPARE_ORDER ("nats-first", the
# default, or "raftmq-first"). Needs go, jq, curl; about 4 minutes, plus a
# one-time build of NATS.
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=${COMPARE_DURATION:-10s}
W=$(mktemp -d "${TMPDIR:-/tmp}/raftmq-compare.XXXXXX")
trap 'rm -rf "$W"' EXIT

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
nats_run() {
  echo "== NATS, sync $1" >&2
  NATS_SYNC=$1 NATS_RESULTS="$W/nats-$1.txt" bash integration/bench-nats.sh >&2
}
raftmq_run() {
  local mode=$1 flags=""
  if [[ $mode == quorum-memory ]]; then
    # Not `| grep -q`: grep quits at the first match, the help's writer
    # then dies of SIGPIPE, and pipefail reports the flag missing.
    local help
    help=$(bin/raftmq server --help 2>/dev/null || true)
    if [[ $help != *--durability* ]]; then
      echo "== raftmq $mode: this build has no --durability; skipped" >&2
      return 0
    fi
    flags="--durability=quorum-memory"
  fi
  echo "== raftmq, $mode" >&2
  BENCH_OUT=- BENCH_CASES="a b c c1" BENCH_RESULTS="$W/raftmq-$mode" BENCH_DURATION="$DUR" \
    BENCH_SYNC_DURATION="$DUR" BENCH_SERVER_FLAGS="$flags" bash integration/bench.sh >&2
}

CGO_ENABLED=0 go build -o bin/raftmq ./cmd/raftmq
if [[ "${COMPARE_ORDER:-nats-first}" == raftmq-first ]]; then
  raftmq_run quorum-fsync; raftmq_run quorum-memory; nats_run default; nats_run always
else
  nats_run default; nats_run always; raftmq_run quorum-fsync; raftmq_run quorum-memory
fi
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# nats SETTING KEY: a figure of one NATS run, "" when missing.
nats() { awk -v k="$2" '$1 == k {print $2}' "$W/nats-$1.txt" 2>/dev/null; }
# rmq MODE CASE JQ: a figure of one raftmq case, "" when missing.
rmq() { local f="$W/raftmq-$1/$2.json"; [[ -s $f ]] && jq -r "$3" "$f" || true; }
ratio() { [[ -n "$1" && -n "$2" ]] && awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}' || echo "-"; }
or_dash() { [[ -n "$1" ]] && echo "$1" || echo "-"; }

RATE='.msgs_per_sec | round'
P50='.latency.p50_ns / 1e6 * 1000 | round / 1000'
row() { # label nats-key raftmq-case
  local nd na rf rm
  nd=$(nats default "$2"); na=$(nats always "$2")
  rf=$(rmq quorum-fsync "$3" "$RATE"); rm=$(rmq quorum-memory "$3" "$RATE")
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$(or_dash "$nd")" "$(or_dash "$na")" \
    "$(or_dash "$rf")" "$(or_dash "$rm")" "$(ratio "$rf" "$na")" "$(ratio "$rm" "$nd")"
}

echo "Run $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) vCPU; load average (1/5/15 min) before $LOAD_BEFORE, after $LOAD_AFTER."
echo "msg/s unless marked; the last two columns are raftmq / NATS at equal durability (p50: NATS / raftmq)."
echo
echo "| workload | NATS default | NATS always | raftmq quorum-fsync | raftmq quorum-memory | fsync / always | memory / default |"
echo "|---|---|---|---|---|---|---|"
row "1 producer synchronous, 1 KiB" sync1k a
nd=$(nats default sync1k_p50); na=$(nats always sync1k_p50)
rf=$(rmq quorum-fsync a "$P50"); rm=$(rmq quorum-memory a "$P50")
printf '| same, p50 ms | %s | %s | %s | %s | %s | %s |\n' "$(or_dash "$nd")" "$(or_dash "$na")" "$(or_dash "$rf")" \
  "$(or_dash "$rm")" "$(ratio "$na" "$rf")" "$(ratio "$nd" "$rm")"
row "4 producers × 256 in flight, 1 KiB" async1k b
row "4 producers × 256 in flight, 100 B" async100 c
row "1 consumer reads the 1 KiB topic" read1k c1
