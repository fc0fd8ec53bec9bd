# Two set-up commands: `make demo` and `make test`. Each creates .venv when
# needed and reinstalls only when pyproject.toml changed (stamp file).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint format bench clean install e2e-deps constraints wheel-check view typecheck

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml setup.py constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

E2E_STAMP := e2e/node_modules/.installed

# The real agent CLIs for the end-to-end tests (project-local, from npm).
# Without npm the install is skipped and those tests say so and skip.
$(E2E_STAMP): e2e/package.json e2e/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix e2e --no-audit --no-fund --loglevel=error && touch $(E2E_STAMP); \
	else echo "npm not found: skipping agent CLIs (their end-to-end tests will skip)"; fi

# Aider (PyPI) for the end-to-end tests, in its own venv: its pinned
# dependency tree would clash with corral's. pip caches downloads in
# ~/.cache/pip. When it cannot install (no PyPI, a Python it does not
# support), the venv is removed and those tests say so and skip.
AIDER_VENV := e2e/aider-venv
AIDER_STAMP := $(AIDER_VENV)/.installed

$(AIDER_STAMP): e2e/aider-requirements.txt
	@rm -rf $(AIDER_VENV); \
	if $(PYTHON) -m venv $(AIDER_VENV) && \
		$(AIDER_VENV)/bin/python -m pip install -q --disable-pip-version-check -r e2e/aider-requirements.txt; then \
		touch $(AIDER_STAMP); \
	else rm -rf $(AIDER_VENV); echo "could not install Aider: skipping it (its end-to-end tests will skip)"; fi

install: $(STAMP)

# What only the end-to-end tests need (npm's agent CLIs, Aider's venv): `make
# -j2 e2e-deps` installs both at once; .ci/run runs it beside `make lint`.
e2e-deps: $(E2E_STAMP) $(AIDER_STAMP)

demo: $(STAMP)
	$(BIN)/corral demo

# Tests run on parallel workers, one per core plus one (3 on 2 cores, at most
# 8): most tests wait on real processes (agent CLIs, tmux, sshd), so a worker
# more than the cores overlaps the waits; the files that boot real agent CLIs
# share one worker, and lanes go out longest first (tests/conftest.py).
# TEST_WORKERS=0 runs serially.
# Tests run with bytecode caches, as an installed corral does, kept outside
# the clone (PYTHONPYCACHEPREFIX): with PYTHONDONTWRITEBYTECODE set, every
# worker and every corral process a test starts compiled its modules afresh
# (collection alone took 20 s a worker instead of 3).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n + 1 < 8 ? n + 1 : 8 )))
PYCACHE ?= $(HOME)/.cache/corral/pycache
test: $(STAMP) $(E2E_STAMP) $(AIDER_STAMP)
	env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(PYCACHE) $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)

# The type checker and the import contracts read the package as it installs
# (`corral.supervisor`, `corral.tui`): build/view/corral links the root folders
# under that name, since neither tool follows the editable install's mapping.
# The test fakes are checked too (build/view/tests), since tests drive the
# engine through them.
VIEW := build/view
view:
	@mkdir -p $(VIEW)/corral
	@ln -sfn $(CURDIR)/corral/__init__.py $(VIEW)/corral/__init__.py
	@for d in supervisor tui assets; do ln -sfn $(CURDIR)/$$d $(VIEW)/corral/$$d; done
	@ln -sfn $(CURDIR)/tests $(VIEW)/tests

lint: $(STAMP) view
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	cd $(VIEW) && PYTHONPATH=. $(CURDIR)/$(BIN)/lint-imports --no-cache --config $(CURDIR)/pyproject.toml
	$(MAKE) --no-print-directory typecheck

typecheck: $(STAMP) view
	cd $(VIEW) && $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml -p corral.supervisor -p corral.tui -p tests.fakes

# What users install: the built wheel in fresh venvs beside PyPI's own
# `supervisor` and `tui`, installed both ways round (see .ci/wheel-check).
wheel-check: $(STAMP)
	bash .ci/wheel-check

constraints: $(STAMP)
	{ head -2 constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | grep -v '^corral'; } > constraints.new
	mv constraints.new constraints.txt

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python bench/events.py
	$(BIN)/python bench/git.py
	$(BIN)/python bench/panes.py --quick
	$(BIN)/python bench/status.py --quick --console
	$(BIN)/python bench/tui.py --quick
	$(BIN)/python bench/control.py

clean:
	rm -rf $(VENV) build *.egg-info
