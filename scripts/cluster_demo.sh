#!/usr/bin/env bash
# A small live cluster on this machine (`make cluster-demo`, docs/scheduler.md):
# three gandivad nodes, each with one CPU device, its own Unix socket and its
# own CURVE-authenticated TCP port (the nodes are peers, so jobs can migrate
# between them), and a `gandiva scheduler` over them running the gandiva
# policy. Submits four real PyTorch training jobs (two MLPs, a CNN and a
# 2-rank DDP gang), shows the queue while they run, waits for all of them and
# stops everything it started. About a minute.
#
# usage: scripts/cluster_demo.sh [BUILD_DIR]   (default build; KEEP=1 keeps the logs)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD="$(cd "${1:-$ROOT/build}" && pwd)"
GANDIVA="$BUILD/cli/gandiva"
GANDIVAD="$BUILD/node/gandivad"
PYTHON=/usr/bin/python3
JOBS="$ROOT/tests/integration/jobs"
DIR="$(mktemp -d /tmp/gandiva-cluster-demo.XXXXXX)"
PIDS=()

cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [[ -n ${KEEP:-} ]]; then echo "logs kept in $DIR"; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*" >&2; "$@"; }

say "three gandivad nodes in $DIR (a, b, c; one CPU device each)"
mkdir -p "$DIR/keys"
NODES=(a b c)
declare -A PORT
for n in "${NODES[@]}"; do
  "$GANDIVA" keygen --out "$DIR/keys" --name "$n" >/dev/null
  PORT[$n]=$($PYTHON -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
done
cat "$DIR"/keys/*.pub >"$DIR/authorized"
: >"$DIR/nodes"
for n in "${NODES[@]}"; do
  mkdir -p "$DIR/$n"
  : >"$DIR/$n/peers"
  for m in "${NODES[@]}"; do
    [[ $m == "$n" ]] || echo "$m tcp://127.0.0.1:${PORT[$m]} $(cat "$DIR/keys/$m.pub")" >>"$DIR/$n/peers"
  done
  "$GANDIVAD" --node "$n" --devices cpu:1 --endpoint "ipc://$DIR/$n/gd.sock" \
    --tcp "tcp://127.0.0.1:${PORT[$n]}" --key "$DIR/keys/$n.key" \
    --authorized-keys "$DIR/authorized" --peers "$DIR/$n/peers" >"$DIR/$n/gandivad.log" 2>&1 &
  PIDS+=($!)
  echo "$n ipc://$DIR/$n/gd.sock" >>"$DIR/nodes"
done
for n in "${NODES[@]}"; do
  for _ in $(seq 100); do [[ -S $DIR/$n/gd.sock ]] && break; sleep 0.1; done
done
show cat "$DIR/nodes"

say "the scheduler (policy gandiva: time-slices, packs, migrates)"
export GANDIVA_SCHEDULER="ipc://$DIR/sched.sock"
export PYTHONPATH="$BUILD/python" OMP_NUM_THREADS=1
"$GANDIVA" scheduler --nodes "$DIR/nodes" --state-dir "$DIR/state" --policy gandiva \
  --interval 5 --pass-ms 200 >"$DIR/scheduler.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do "$GANDIVA" queue >/dev/null 2>&1 && break; sleep 0.2; done

say "four real training jobs"
ids=()
ids+=($(show "$GANDIVA" submit --name mlp-short -- $PYTHON "$JOBS/sched_job.py" --steps 300 --step-ms 20))
ids+=($(show "$GANDIVA" submit --name mlp-long -- $PYTHON "$JOBS/sched_job.py" --steps 600 --step-ms 20))
ids+=($(show "$GANDIVA" submit --name cnn -- $PYTHON "$ROOT/examples/pytorch/train_cnn.py" \
  --iterations 600 --batch 32 --threads 1 --report-every 200))
ids+=($(show "$GANDIVA" submit --name ddp --ranks 2 -- $PYTHON "$JOBS/torchrun.py" \
  --rdzv_backend=c10d --rdzv_endpoint=localhost:0 --nnodes=1 --nproc_per_node=2 \
  "$JOBS/ddp_job.py" --iterations 200 --work-ms 15 --out "$DIR/ddp"))
echo "job ids: ${ids[*]}"

say "the queue, a few seconds in"
sleep 6
show "$GANDIVA" queue

say "waiting for every job"
for id in "${ids[@]}"; do
  "$GANDIVA" wait "$id" --scheduler >/dev/null && echo "job $id finished" || echo "job $id: exit $?"
done
show "$GANDIVA" queue --all
show "$GANDIVA" logs "${ids[2]}" --scheduler

say "stopping the scheduler and the nodes"
