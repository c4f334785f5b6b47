#!/usr/bin/env bash
# One prepared check of every CUDA path on one card: under 8 minutes on an H200, every figure
# written to $OUT (summary.txt first, then one file per part). It fails loudly and early when
# the project cannot be installed or no card is visible, and says what it could not do.
#
#   OUT=/some/folder bash bench/gpu_check.sh           # on a machine with a card
#   OUT=/tmp/check bash bench/gpu_check.sh --cpu       # the same parts, short, on CPU
#
# Parts: (0) install: a venv that sees a preinstalled CUDA torch, else pip's default torch;
# (a) `ablate probe` of the charlm recipe; (b) the charlm campaign on `devices: auto` with 1
# and 2 slots per device, with the device each run saw; (c) driver overhead against a bare
# loop of the same model (goal <= 3% on a GPU); (d) checkpoint stall of the charlm state
# against a synchronous save (goal <= 0.2x); (e) kill and resume of a run, final metrics
# bitwise equal with deterministic algorithms, or the difference; (f) `ablate verify` of both
# campaign folders; (g) `pytest -m gpu`. Environment: VENV (default .venv-gpu, or an existing
# .venv with --cpu), PYTHON (the interpreter to look for torch in), LIMIT (seconds per part),
# BUDGET (seconds in all, 470: a part that would start after it is reported NOT RUN).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for the figures}"
mkdir -p "$OUT"
MODE=gpu
if [[ "${1:-}" == "--cpu" || "${DEVICE:-}" == "cpu" ]]; then MODE=cpu; fi
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
START=$SECONDS
FAILED=0
note() { echo "$*" | tee -a "$SUMMARY"; }
die() { note "FATAL: $*"; note "stopped after $((SECONDS - START)) s"; exit 1; }
BUDGET=${BUDGET:-$([[ $MODE == gpu ]] && echo 470 || echo 1500)}  # the device session: 8 min
part() {  # part NAME LIMIT COMMAND...: run one part under a time limit, log its verdict
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS left=$((BUDGET - (SECONDS - START)))
  if [[ $left -lt 20 ]]; then
    FAILED=1; note "NOT RUN $name: the ${BUDGET} s budget is spent"; return
  fi
  [[ $limit -gt $left ]] && limit=$left
  echo "=== $name (limit ${limit}s, at $((SECONDS - START)) s)"
  timeout --kill-after=10 "$limit" "$@"
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    note "ok     $name ($((SECONDS - t0)) s)"
  else
    FAILED=1
    note "FAILED $name (exit $rc$([[ $rc -eq 124 ]] && echo ', timed out'), $((SECONDS - t0)) s)"
  fi
}
note "gpu_check mode=$MODE on $(hostname) at $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$SUMMARY"

# --- (0) install ------------------------------------------------------------------------
has_cuda_torch() { "$1" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; }
if [[ $MODE == cpu && -z "${VENV:-}" && -x .venv/bin/ablate ]]; then
  VENV=.venv
  note "install: reusing $VENV (cpu mode)"
else
  VENV=${VENV:-.venv-gpu}
  BASE=""
  for candidate in ${PYTHON:-} python3 /usr/bin/python3 /opt/conda/bin/python /usr/local/bin/python3; do
    if command -v "$candidate" >/dev/null && has_cuda_torch "$candidate"; then BASE=$candidate; break; fi
  done
  if [[ -n $BASE ]]; then
    note "install: preinstalled CUDA torch in $BASE ($("$BASE" -c 'import torch; print(torch.__version__, torch.version.cuda)'))"
    "$BASE" -m venv --system-site-packages "$VENV" || die "python3 -m venv failed"
  else
    [[ $MODE == gpu ]] && note "install: no preinstalled CUDA torch found; trying pip's default torch (a CUDA build on Linux, GBs)"
    python3 -m venv "$VENV" || die "python3 -m venv failed"
    "$VENV/bin/python" -m pip install --quiet torch \
      || die "could not install torch from a package registry (none reachable?): nothing below can run"
  fi
  "$VENV/bin/python" -m pip install --quiet -e '.[dev]' \
    || die "could not install the project's dependencies (prefect, optuna, pydantic, s3fs, moto...) from a package registry: nothing below can run"
  note "install: done in $((SECONDS - START)) s"
fi
PY="$VENV/bin/python"
ABLATE="$VENV/bin/ablate"
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1 PYTHONUNBUFFERED=1
"$PY" - <<'EOF' | tee -a "$SUMMARY" || die "torch does not import in $VENV"
import torch
cuda = torch.cuda.is_available()
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cards {torch.cuda.device_count()}"
      + (f": {torch.cuda.get_device_name(0)}, {torch.cuda.get_device_properties(0).total_memory / 1e9:.0f} GB, bf16 {torch.cuda.is_bf16_supported()}" if cuda else ""))
EOF
if [[ $MODE == gpu ]]; then
  has_cuda_torch "$PY" || die "no CUDA device visible to torch in $VENV: this script checks CUDA paths (use --cpu to try it without a card)"
  DEV=cuda:0; SIZE=gpu; STEPS=200; LIMIT=${LIMIT:-120}
  KR=(--steps 200 --every 50 --kill-after 100 --params '{"n_layer": 4, "n_embd": 256, "n_head": 4, "block_size": 256, "batch_size": 64}')
  OVERHEAD=(--workload charlm --steps 200 --repeats 3 --params '{"n_layer": 4, "n_embd": 256, "n_head": 4, "block_size": 256, "batch_size": 64}')
  STALL=(--workload charlm --saves 4 --params '{"n_layer": 4, "n_embd": 384, "n_head": 6, "block_size": 256, "batch_size": 64}')
else
  DEV=cpu; SIZE=cpu; STEPS=40; LIMIT=${LIMIT:-300}
  KR=(--steps 40 --every 10 --kill-after 20 --params '{"n_layer": 1, "n_embd": 32, "n_head": 2, "block_size": 32}')
  OVERHEAD=(--workload charlm --steps 40 --repeats 2 --params '{"n_layer": 1, "n_embd": 32, "n_head": 2, "block_size": 32}')
  STALL=(--workload charlm --saves 2 --params '{"n_layer": 1, "n_embd": 32, "n_head": 2, "block_size": 32}')
fi

# --- (a) probe ------------------------------------------------------------------------------
for k in 1 2; do
  "$PY" bench/gpu_campaign.py plan --slots $k --size $SIZE --steps $STEPS --out "$OUT/plan-$k.yaml" \
    || die "could not write the charlm plans"
done
PROBE_ARGS=()
[[ $MODE == cpu ]] && PROBE_ARGS=(--variants control)  # short: one variant's 12 points
part "a probe" "$LIMIT" "$ABLATE" probe "$OUT/plan-1.yaml" --devices "$DEV" --out "$OUT/probe" "${PROBE_ARGS[@]}"
if [[ -f "$OUT/probe/probe.json" ]]; then
  "$PY" - "$OUT" <<'EOF' | tee -a "$SUMMARY"
import sys
from pathlib import Path
from ablations.plan.io import load_plan
from ablations.probe.sweep import for_plan
from ablations.slots.devices import plan_slots
folder = Path(sys.argv[1])
plan = load_plan(folder / "plan-1.yaml")
probe = for_plan(plan, folder / "plan-1.yaml", folder / "probe" / "probe.json")
auto = plan.resources.model_copy(update={"slots_per_device": "auto"})
slots = plan_slots(auto, None, probe.planned_peak_bytes, plan.probe.margin)
print(f"probe: peak {probe.peak_bytes / 2**20:.0f} MiB ({probe.memory_source}), class {probe.memory_class()} GB, "
      f"largest safe batch {probe.largest_safe_batch()}, {probe.seconds:.1f} s; "
      f"slots_per_device auto -> {[s.name for s in slots]}")
EOF
  "$ABLATE" plan "$OUT/plan-1.yaml" --probe "$OUT/probe/probe.json" | tail -1 | tee -a "$SUMMARY"
fi

# --- (b) campaigns: devices auto, 1 and 2 slots per device -----------------------------------
for k in 1 2; do
  part "b campaign $k slot(s)/device" "$LIMIT" "$ABLATE" run "$OUT/plan-$k.yaml" --out "$OUT/campaign-$k"
  "$PY" bench/gpu_campaign.py devices "$OUT/campaign-$k" --json "$OUT/devices-$k.json" | tail -4 | tee -a "$SUMMARY"
done
[[ -f "$OUT/probe/probe.json" && -d "$OUT/campaign-1/records" ]] \
  && "$PY" bench/probe_accuracy.py --probe "$OUT/probe/probe.json" --campaign "$OUT/campaign-1" \
       --json "$OUT/probe_accuracy.json" | tee -a "$SUMMARY"

# --- (c) driver overhead, (d) checkpoint stall, (e) kill and resume --------------------------
part "c driver overhead" "$LIMIT" bash -c "'$PY' bench/driver_overhead.py --device $DEV ${OVERHEAD[*]@Q} | tee '$OUT/driver_overhead.txt'"
part "d checkpoint stall" "$LIMIT" bash -c "'$PY' bench/checkpoint_stall.py --device $DEV ${STALL[*]@Q} | tee '$OUT/checkpoint_stall.txt'"
part "e kill and resume" "$LIMIT" bash -c "'$PY' bench/kill_resume.py --device $DEV ${KR[*]@Q} --out '$OUT/kill-resume' | tee '$OUT/kill_resume.txt'"
for figures in driver_overhead checkpoint_stall kill_resume; do
  [[ -s "$OUT/$figures.txt" ]] && tail -n 1 "$OUT/$figures.txt" >> "$SUMMARY"
done

# --- (f) verify, (g) GPU tests ----------------------------------------------------------------
for k in 1 2; do
  [[ -d "$OUT/campaign-$k" ]] && part "f verify campaign-$k" 120 "$ABLATE" verify "$OUT/campaign-$k"
done
if [[ $MODE == gpu ]]; then
  part "g pytest -m gpu" "$LIMIT" "$PY" -m pytest -q -m gpu tests/gpu -p no:cacheprovider
else
  note "skipped g pytest -m gpu (no card in --cpu mode)"
fi
note "total $((SECONDS - START)) s; $([[ $FAILED -eq 0 ]] && echo 'every part ok' || echo 'SOME PARTS FAILED (see above and gpu_check.log)')"
exit $FAILED
