# Loupe. `make run` starts everything on embedded defaults; `make test` runs the whole suite.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
CHROMIUM ?= /usr/bin/chromium
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: setup run test bench soak coldstart flywheel frontend chromium clean stop lint

setup: $(VENV)/.installed frontend/dist/index.html chromium

$(VENV)/.installed: requirements.txt
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	@touch $@

$(BIN)/node: $(VENV)/.installed
	$(BIN)/nodeenv -p --node=system
	@touch $@

frontend/node_modules/.installed: frontend/package-lock.json $(BIN)/node
	cd frontend && npm ci --no-audit --no-fund
	@touch $@

frontend/dist/index.html: frontend/node_modules/.installed $(shell find frontend/src frontend/index.html frontend/vite.config.* -type f 2>/dev/null)
	cd frontend && npm run build

frontend: frontend/dist/index.html

chromium:
	@test -x $(CHROMIUM) || { echo "Installing Chromium (Debian package)…"; \
	  $(if $(shell command -v sudo),sudo) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(if $(shell command -v sudo),sudo) apt-get install -y -qq chromium >/dev/null; }

run: setup
	$(BIN)/python manage.py loupe_run --host $(HOST) --port $(PORT)

test: setup
	cd frontend && npm test --silent
	$(BIN)/python -m pytest --durations=25 $(PYTEST_ARGS)

bench: setup
	$(BIN)/python -m bench

soak: setup
	$(BIN)/python -m pytest -m soak tests/

coldstart: setup
	$(BIN)/python -m pytest -m coldstart tests/

flywheel: setup
	$(BIN)/python -m pytest -m flywheel -s tests/

stop:
	-$(BIN)/python -c "from webapp import embedded; embedded.redis_stop(); embedded.postgres_stop()"

clean:
	rm -rf $(VENV) frontend/node_modules frontend/dist .pytest_cache
