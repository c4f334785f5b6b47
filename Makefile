# Two entry points: `make demo` (the demo campaign) and `make test` (what CI runs).
# Both create .venv when it is missing; nothing needs to be installed beforehand but python3.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# torch 2.13.0's CPU build is what this machine's disk (and CI) has; a bare `torch` would pull
# a multi-GB CUDA build. Users elsewhere install the project normally (torch>=2.3).
TORCH  ?= torch==2.13.0
PLAN   ?= ablations/recipes/demo.yaml
OUT    ?= demo-out
# Bytecode is written on first import, for the modules a process actually imports: compiling
# every installed file up front (torch, transformers, sympy...) took 28 s of a fresh install,
# most of it for modules nothing imports. An environment that forbids writing it
# (PYTHONDONTWRITEBYTECODE=1, as some CI images set) would instead recompile each module in
# every one of the suite's hundreds of processes.
export PYTHONDONTWRITEBYTECODE=
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export DO_NOT_TRACK=1

.PHONY: venv demo test test-long check lint typecheck docs durations cpu-usage clean

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch through pip, which finds the CPU build on this machine's disk (uv does not look
	# there), and uv, which installs the rest in a fifth of pip's time (27 s against 60 s in
	# a fresh venv: it downloads in parallel and resolves in one pass).
	$(BIN)/python -m pip install --quiet --no-compile $(TORCH) uv
	# The adapters' extras too (their tests run in `make test`); torch on the same line, so
	# uv keeps the installed build while resolving them (it never downloads another one).
	$(BIN)/uv pip install --quiet --python $(BIN)/python $(TORCH) -e '.[dev,lightning,hf]'
	# The temporary Prefect server's migrated database, once per user: a first campaign on a
	# fresh Prefect home then starts as fast as the second (flows/server_database.py).
	$(BIN)/python -m flows.server_database
	touch $@

venv: $(BIN)/.installed

demo: venv
	$(BIN)/ablate validate $(PLAN)
	$(BIN)/ablate run $(PLAN) --out $(OUT)
	$(BIN)/ablate verify $(OUT)

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

# The documentation (mkdocs.yml), built strictly: a broken link or anchor, a page missing from
# the nav, any warning fails it. docs/plan.md's reference is generated from `ablate schema` at
# each build (docs/hooks/plan_reference.py). The variable silences MkDocs' banner about 2.0.
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Three pytest processes on two cores, one test file each at a time: most tests wait on
# subprocesses (slot workers, a Prefect server), and two processes kept the cores busy only
# 1.15 of 2 (make test's tests: 392 s with three against 480 s with two on a quiet machine).
# The files go out longest first, as tests/durations.json measured them (tests/durations.py):
# xdist's own order (most tests first) left the longest campaign for last while the other
# processes idled. `make durations` measures them again. The long tests (minutes of pool
# campaigns each, on a server with its workers) run two at a time.
PYTEST_ARGS := -q --dist loadfile --no-loadscope-reorder
PYTEST := $(BIN)/python -m pytest -n 3 $(PYTEST_ARGS)
PYTEST_LONG := $(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

# mypy runs beside the tests (one process; the tests leave a core idle at times), its
# report printed after theirs; either failing fails the target.
WITH_TYPES = $(BIN)/mypy > .mypy.log 2>&1 & types=$$!; $(1); tests=$$?; \
	wait $$types; typed=$$?; cat .mypy.log; test $$tests -eq 0 -a $$typed -eq 0

# Every test but the few marked `long` (a minute or more each: the work-pool campaigns, store
# outages and a full disk, the whole demo, four kills in a row, the Lightning and HF Trainer
# campaigns), which would take the suite past 8 minutes on 2 cores: `make test-long` runs
# those, and CI (.ci/run) runs it after.
test: lint docs
	$(call WITH_TYPES,$(PYTEST) -m 'not long')

test-long: venv
	$(PYTEST_LONG) -m long

# CPU seconds per test file (tests/cpu_usage.py): what to cut when `make test` runs long; unlike
# wall time, it barely moves with the machine's other load.
cpu-usage: venv
	rm -rf .cpu-usage
	$(PYTEST) -m 'not long' -p tests.cpu_usage
	$(BIN)/python -m tests.cpu_usage

# Measure each test file's duration again, for the order above (after adding a long test).
durations: venv
	$(PYTEST) --junitxml=.durations.xml
	$(BIN)/python -m tests.durations .durations.xml
	rm -f .durations.xml

# The development loop: lint, types and every test not marked slow (no end-to-end campaigns).
check: lint
	$(call WITH_TYPES,$(PYTEST) -m 'not slow')

clean:
	rm -rf $(OUT) site .pytest_cache .mypy_cache .ruff_cache .mypy.log
