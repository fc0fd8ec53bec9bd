# Two set-up commands: `make demo` and `make test`. Each creates .venv when
# needed and reinstalls only when pyproject.toml changed (stamp file).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint format bench clean install

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

E2E_STAMP := e2e/node_modules/.installed

# The real agent CLIs for the end-to-end tests (project-local, from npm).
# Without npm the install is skipped and those tests say so and skip.
$(E2E_STAMP): e2e/package.json e2e/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix e2e --no-audit --no-fund --loglevel=error && touch $(E2E_STAMP); \
	else echo "npm not found: skipping agent CLIs (their end-to-end tests will skip)"; fi

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/corral demo

test: $(STAMP) $(E2E_STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python bench/events.py
	$(BIN)/python bench/git.py
	$(BIN)/python bench/panes.py --quick
	$(BIN)/python bench/tui.py --quick

clean:
	rm -rf $(VENV) build *.egg-info
