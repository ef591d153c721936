# Each target sets up what it needs: .venv is (re)built from pyproject.toml when it is
# missing or older than pyproject.toml.
PYTHON ?= python3
VENV := .venv
INSTALLED := $(VENV)/.installed

.PHONY: study test drills lint format clean-venv

study: $(INSTALLED)  ## the main job: lra_sharing's quick preset on local Ray, SQLite store
	$(VENV)/bin/python -m studies.run lra_sharing

test: lint  ## lint, then the test suite (the drills aside)
	$(VENV)/bin/python -m pytest -q --durations=20

drills: $(INSTALLED)  ## the long drills: real drivers, workers and Ray nodes killed or stopped, several drivers, a cold compile
	$(VENV)/bin/python -m pytest -q -m drill --durations=10

lint: $(INSTALLED)  ## ruff's lint and format checks
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(INSTALLED)  ## apply ruff's fixes and formatting
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

$(INSTALLED): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $@

clean-venv:
	rm -rf $(VENV)
