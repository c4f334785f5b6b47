#!/usr/bin/env bash
# One prepared check of every CUDA path on one card, offline: under 8 minutes on an H200, the
# install included. Three files come back in $OUT (or the folder given): summary.txt (each
# part's verdict and figures), gpu_check.log (everything printed) and results.tar.gz (the
# parts' text, JSON, CSV, Markdown and PNG files; no checkpoints, weights or databases).
#
#   WHEELHOUSE=.wheelhouse OUT=/some/folder bash bench/gpu_check.sh   # on the lent card
#   bash bench/gpu_check.sh --cpu /tmp/check                          # the same parts, on CPU
#
# (0) install: a venv that sees a preinstalled torch through a .pth file (the image's python3 is
# itself a venv, so --system-site-packages would not see its torch); with WHEELHOUSE=DIR the
# dependencies come from that folder only (pip --no-index; bench/build_wheelhouse.py builds it
# where a registry is reachable), then the project, editable, from this checkout; without one
# they come from a registry. In --cpu mode without WHEELHOUSE an existing .venv is used as is.
# Then the parts, in this order, each under its own time cap (PARTS=probe,size runs a subset):
#   tests     pytest -m gpu (in --cpu mode the CPU cases of tests/gpu)
#   probe     `ablate probe` of the charlm recipe, every variant: each must have all its points
#   overhead  the driver against a bare loop, charlm, eval off, 3 paired repeats (goal <= 3% on
#             a GPU), with profiler tables of one run each
#   stall     checkpoint stall against a synchronous save (goal <= 0.2x): moto's S3 server when
#             moto is installed, else a local file store
#   size      bench/gpu_size.py: an 85M-parameter charlm campaign, probe, then 1, 2, 4 slots per
#             card: runs per hour, GPU utilisation, peak memory against the probe, auto's pick
#   resume    kill a CUDA run and resume it (deterministic algorithms): bitwise equal?
#   verify    `ablate verify` of the size campaign's first folder
# Environment: OUT, WHEELHOUSE, VENV (default .venv-gpu), PYTHON (an interpreter with torch),
# BUDGET (seconds in all, install included; 470 on a GPU), PARTS, WORK (the scratch folder).
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=gpu
for arg in "$@"; do
  case $arg in
    --cpu) MODE=cpu ;;
    -*) echo "unknown option $arg" >&2; exit 2 ;;
    *) OUT=$arg ;;
  esac
done
[[ ${DEVICE:-} == cpu ]] && MODE=cpu
: "${OUT:?give the folder for the results: OUT=DIR or an argument}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=${WORK:-$(mktemp -d /tmp/gpu_check.XXXXXX)}
mkdir -p "$WORK"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
START=$SECONDS
FAILED=0
BUDGET=${BUDGET:-$([[ $MODE == gpu ]] && echo 470 || echo 1500)}  # the device session: 8 min
PARTS=${PARTS:-tests,probe,overhead,stall,size,resume,verify}
note() { echo "$*" | tee -a "$SUMMARY"; }
wanted() { [[ ",$PARTS," == *",$1,"* ]]; }
pack() {  # results.tar.gz: what the parts wrote that is text, JSON, CSV, Markdown or an image
  (cd "$WORK" && find . -type f \( -name '*.txt' -o -name '*.json' -o -name '*.md' -o -name '*.csv' \
      -o -name '*.png' -o -name '*.yaml' -o -name '*.log' -o -name '*.xml' \) \
      -not -path '*/checkpoints/*' -not -path '*/models/*' -not -path '*/.venv*' -size -4M \
      | sort > "$WORK/.packed" && tar -czf "$OUT/results.tar.gz" -T "$WORK/.packed")
  echo "results.tar.gz: $(wc -l < "$WORK/.packed") files, $(du -k "$OUT/results.tar.gz" | cut -f1) KiB (scratch: $WORK)"
}
finish() { note "total $((SECONDS - START)) s; $([[ $FAILED -eq 0 ]] && echo 'every part ok' || echo 'SOME PARTS FAILED (see above and gpu_check.log)')"; pack; }
die() { note "FATAL: $*"; FAILED=1; finish; exit 1; }
part() {  # part NAME CAP COMMAND...: one part under a time cap (and the budget), its verdict
  local name=$1 cap=$2; shift 2
  local t0=$SECONDS left=$((BUDGET - (SECONDS - START)))
  if [[ $left -lt 20 ]]; then
    FAILED=1; note "NOT RUN $name: the ${BUDGET} s budget is spent"; return 1
  fi
  [[ $cap -gt $left ]] && cap=$left
  echo "=== $name (cap ${cap} s, at $((SECONDS - START)) s)"
  timeout --kill-after=15 "$cap" "$@"
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    note "ok     $name ($((SECONDS - t0)) s)"
  else
    FAILED=1
    note "FAILED $name (exit $rc$([[ $rc -eq 124 ]] && echo ', over its cap'), $((SECONDS - t0)) s)"
  fi
  return $rc
}
note "gpu_check mode=$MODE on $(hostname) at $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(nproc) CPUs, budget ${BUDGET} s, parts $PARTS"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee -a "$SUMMARY"

# --- (0) install ----------------------------------------------------------------------------
has_torch() {  # has_torch PYTHON: torch imports there (with CUDA in gpu mode)
  local test='import torch'
  [[ $MODE == gpu ]] && test='import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'
  "$1" -c "$test" 2>/dev/null
}
if [[ $MODE == cpu && -z ${WHEELHOUSE:-} && -z ${VENV:-} && -x .venv/bin/ablate ]]; then
  VENV=.venv
  note "install: reusing $VENV (cpu mode)"
else
  VENV=${VENV:-.venv-gpu}
  BASE=""
  for candidate in ${PYTHON:-} python3 /usr/bin/python3 /opt/conda/bin/python /usr/local/bin/python3; do
    if command -v "$candidate" >/dev/null && has_torch "$candidate"; then BASE=$candidate; break; fi
  done
  [[ -n $BASE ]] || die "no interpreter with a preinstalled $([[ $MODE == gpu ]] && echo 'CUDA ')torch found (set PYTHON): nothing below can run"
  note "install: torch of $BASE ($("$BASE" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda)'))"
  rm -rf "$VENV"
  # Without its own pip and setuptools: those of the interpreter with torch (seen through the
  # .pth below) install and build here; a venv's bundled setuptools may be too old to build.
  "$BASE" -m venv --without-pip "$VENV" || die "python -m venv failed"
  SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  # The folder holding torch (and the rest of that interpreter's packages), after the venv's own.
  "$BASE" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))' > "$SITE/_preinstalled.pth"
  "$VENV/bin/python" -m pip --version > /dev/null 2>&1 || "$VENV/bin/python" -m ensurepip -q || die "no pip for $VENV"
  PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-compile)
  if [[ -n ${WHEELHOUSE:-} ]]; then
    shopt -s nullglob; WHEELS=("$WHEELHOUSE"/*.whl); shopt -u nullglob
    if [[ ${#WHEELS[@]} -gt 0 ]]; then
      "${PIP[@]}" --no-index --no-deps "${WHEELS[@]}" || die "could not install the wheels of $WHEELHOUSE"
    fi
    "${PIP[@]}" --no-index --no-deps --no-build-isolation -e . || die "could not install the project from this checkout (offline)"
    note "install: ${#WHEELS[@]} wheels from $WHEELHOUSE (no index), the project editable, in $((SECONDS - START)) s"
  else
    "${PIP[@]}" -e '.[dev]' || die "could not install the project's dependencies (prefect, optuna, pydantic, s3fs...) from a package registry (none reachable? build a wheelhouse: bench/build_wheelhouse.py): nothing below can run"
    note "install: from a package registry in $((SECONDS - START)) s"
  fi
  # Byte-compile once, in parallel: with PYTHONDONTWRITEBYTECODE set, every process would
  # compile prefect and the rest from source again.
  "$VENV/bin/python" -m compileall -q -j 0 "$SITE" ablations flows tasks > /dev/null 2>&1
  "$VENV/bin/python" bench/build_wheelhouse.py check | tail -n 12 | tee -a "$SUMMARY"
  "$VENV/bin/python" -c 'import prefect, optuna, s3fs, pydantic, ablations.cli, flows.cli' || die "the installed project does not import"
  "$VENV/bin/python" -m flows.server_database > /dev/null || note "warning: no migrated Prefect database template (the first campaign pays the migration)"
  note "install: done in $((SECONDS - START)) s"
fi
PY="$VENV/bin/python"
ABLATE=("$PY" -m ablations.cli)
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1 PYTHONUNBUFFERED=1
export PREFECT_HOME=${PREFECT_HOME:-$WORK/prefect-home}
"$PY" - <<'EOF' | tee -a "$SUMMARY" || die "torch does not import in $VENV"
import torch
cuda = torch.cuda.is_available()
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cards {torch.cuda.device_count()}"
      + (f": {torch.cuda.get_device_name(0)}, {torch.cuda.get_device_properties(0).total_memory / 1e9:.0f} GB, bf16 {torch.cuda.is_bf16_supported()}" if cuda else ""))
EOF
if [[ $MODE == gpu ]]; then
  has_torch "$PY" || die "no CUDA device visible to torch in $VENV: this script checks CUDA paths (use --cpu to try it without a card)"
  DEV=cuda:0; SIZE=gpu; STEPS=200; TESTS=(-m gpu tests/gpu tests/ablations/training/test_memory.py)
  SMALL='{"n_layer": 4, "n_embd": 256, "n_head": 4, "block_size": 256, "batch_size": 64}'
  STALL='{"n_layer": 4, "n_embd": 384, "n_head": 6, "block_size": 256, "batch_size": 64}'
  KR=(--steps 200 --every 50 --kill-after 100); SIZE_ARGS=(--slots 1,2,4 --steps 40)
  CAP_TESTS=60; CAP_PROBE=50; CAP_OVERHEAD=60; CAP_STALL=30; CAP_SIZE=210; CAP_RESUME=60; CAP_VERIFY=45
else
  DEV=cpu; SIZE=cpu; STEPS=40; TESTS=(-m "not gpu and not slow" tests/gpu)
  SMALL='{"n_layer": 1, "n_embd": 32, "n_head": 2, "block_size": 32}'; STALL=$SMALL
  KR=(--steps 40 --every 10 --kill-after 20); SIZE_ARGS=(--cpu --slots 1,2 --steps 12)
  CAP_TESTS=300; CAP_PROBE=300; CAP_OVERHEAD=300; CAP_STALL=120; CAP_SIZE=600; CAP_RESUME=300; CAP_VERIFY=120
fi

# --- the parts --------------------------------------------------------------------------------
if wanted tests; then
  part "tests: pytest ${TESTS[*]}" $CAP_TESTS "$PY" -m pytest -q -p no:cacheprovider "${TESTS[@]}" --junitxml="$WORK/pytest.xml"
  "$PY" -c "import sys, xml.etree.ElementTree as E; s = E.parse(sys.argv[1]).getroot().iter('testsuite').__next__().attrib
print(f\"tests: {int(s['tests']) - int(s['skipped'])} run, {s['failures']} failed, {s['errors']} errors, {s['skipped']} skipped\")" "$WORK/pytest.xml" 2>/dev/null | tee -a "$SUMMARY"
fi

if wanted probe; then
  "$PY" bench/gpu_campaign.py plan --slots 1 --size $SIZE --steps $STEPS --out "$WORK/plan-1.yaml" || die "could not write the charlm plan"
  part "probe: every variant of the charlm recipe" $CAP_PROBE "${ABLATE[@]}" probe "$WORK/plan-1.yaml" --devices "$DEV" --out "$WORK/probe"
  if [[ -f "$WORK/probe/probe.json" ]]; then
    "$PY" - "$WORK" <<'EOF' | tee -a "$SUMMARY"
import sys
from pathlib import Path
from ablations.plan.io import load_plan
from ablations.plan.runs import planned_runs
from ablations.plan.model import plan_hash
from ablations.probe.sweep import read
folder = Path(sys.argv[1])
plan, probe = load_plan(folder / "plan-1.yaml"), read(folder / "probe" / "probe.json")
variants = list(dict.fromkeys(r.variant for r in planned_runs(plan, plan_hash(plan))))
counts = {v: (sum(p.ok for p in probe.points if p.variant == v), sum(p.variant == v for p in probe.points)) for v in variants}
every = all(ok == total > 0 for ok, total in counts.values())
print(f"probe: {'every variant has all its points' if every else 'MISSING POINTS'}: "
      + ", ".join(f"{v} {ok}/{total}" for v, (ok, total) in counts.items())
      + f"; peak {probe.peak_bytes / 2**20:.0f} MiB ({probe.memory_source}), largest safe batch {probe.largest_safe_batch()}, {probe.seconds:.0f} s")
sys.exit(0 if every else 1)
EOF
    [[ ${PIPESTATUS[0]} -eq 0 ]] || { FAILED=1; note "FAILED probe: a variant lacks points"; }
  fi
fi

if wanted overhead; then
  part "overhead: driver vs bare loop, eval off, 3 paired repeats" $CAP_OVERHEAD bash -c "'$PY' bench/driver_overhead.py --device $DEV --workload charlm --steps $STEPS --repeats 3 --no-eval-on --params '$SMALL' --profile '$WORK/profile' --json '$WORK/driver_overhead.json' | tee '$WORK/driver_overhead.txt'"
  grep -E "^(driver overhead|profile)" "$WORK/driver_overhead.txt" 2>/dev/null | tee -a "$SUMMARY"
fi

if wanted stall; then
  part "stall: background save vs synchronous" $CAP_STALL bash -c "'$PY' bench/checkpoint_stall.py --device $DEV --workload charlm --saves 4 --params '$STALL' | tee '$WORK/checkpoint_stall.txt'"
  tail -n 1 "$WORK/checkpoint_stall.txt" 2>/dev/null | tee -a "$SUMMARY"
fi

if wanted size; then
  left=$((BUDGET - (SECONDS - START))); cap=$CAP_SIZE; [[ $cap -gt $left ]] && cap=$left
  part "size: charlm campaign, probe then slots per device ${SIZE_ARGS[*]}" $cap "$PY" bench/gpu_size.py --out "$WORK/size" "${SIZE_ARGS[@]}" --budget $((cap - 10))
  [[ -f "$WORK/size/SIZE.md" ]] && tail -n +3 "$WORK/size/SIZE.md" | tee -a "$SUMMARY"
  for folder in "$WORK"/size/campaign-*; do
    [[ -d $folder/records ]] && "$PY" bench/gpu_campaign.py devices "$folder" --json "$folder-devices.json" | tail -n 1 | sed "s|^|$(basename "$folder"): |" | tee -a "$SUMMARY"
  done
fi

if wanted resume; then
  part "resume: kill a run, resume it, compare" $CAP_RESUME bash -c "'$PY' bench/kill_resume.py --device $DEV ${KR[*]} --params '$SMALL' --out '$WORK/kill-resume' | tee '$WORK/kill_resume.txt'"
  tail -n 1 "$WORK/kill_resume.txt" 2>/dev/null | tee -a "$SUMMARY"
fi

if wanted verify; then
  folder=$(ls -d "$WORK"/size/campaign-* 2>/dev/null | head -n 1)
  if [[ -n $folder ]]; then
    part "verify: $(basename "$folder")" $CAP_VERIFY "${ABLATE[@]}" verify "$folder"
  else
    note "NOT RUN verify: no campaign folder (the size part did not run)"
  fi
fi
finish
exit $FAILED
