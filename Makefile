# moesweep: the two commands a new user runs are `make demo` and `make test` (see README).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
# The controller's Python: empty, `make venv` takes the newest of 3.13, 3.12 (ansible-core 2.21) and 3.11 (2.19) it
# finds (scripts/controller-venv); `make venv PYTHON=/path/to/python3.X` names one.
PYTHON ?=
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
SIM_DEBS := systemd-container debootstrap zstd iproute2 openssh-client apt-utils dpkg-dev gnupg
# The headless browser the report's HTML test opens the page in (tests/integration/test_report_browser.py).
BROWSER_DEBS := chromium fonts-dejavu-core

.PHONY: venv sim-deps browser-deps lint sanity unit test demo demo-down clean

# The venv, made again when the Python chosen is another minor version, reinstalled when a pin changed; it says which
# Python and ansible-core it runs, and names the fix when no Python >= 3.11 is found.
venv:
	@PYTHON="$(PYTHON)" scripts/controller-venv $(VENV)

# Debian packages the simulated hosts need on this machine (root; Debian archives only).
sim-deps:
	@missing=""; for p in $(SIM_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi

# Debian's chromium for the report's browser test (root; Debian archives only).
browser-deps:
	@missing=""; for p in $(BROWSER_DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi

lint: venv
	$(BIN)/ruff check .
	$(BIN)/yamllint -s .
	$(BIN)/ansible-lint --profile production -q
	$(MAKE) --no-print-directory sanity

# ansible-test sanity on the collection as `ansible-galaxy collection build` ships it, offline but for PyPI
# (tests/sanity/run.sh: how, and which tests; tests/sanity/ignore-<ansible-core major.minor>.txt: the exceptions,
# each with its reason). Its shellcheck test needs Debian's shellcheck (installed as root; without it that test is skipped).
sanity: venv
	@command -v shellcheck >/dev/null || if [ "$$(id -u)" = 0 ]; then echo "installing: shellcheck"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends shellcheck >/dev/null; \
	else echo "sanity: shellcheck is not installed (apt-get install shellcheck as root): its test is skipped"; fi
	BIN=$(CURDIR)/$(BIN) tests/sanity/run.sh

# The unit and simulator tests in 4 workers, an idle one taking queued tests from a busy one (worksteal; they
# mostly wait on simulated servers' clocks). tests/conftest.py marks the rest serial.
PARALLEL_TESTS := $(BIN)/pytest -q -ra -n 4 --dist worksteal -m "not serial" tests

# The tests that boot hosts or wait on simulated servers in two workers, tests sharing a cluster in one
# (tests/conftest.py: xdist_group_of), then the few marked alone (timings, machine-wide state) one at a time.
SERIAL_TESTS := $(BIN)/pytest -q -ra --durations=15 -n 2 --dist loadgroup -m "serial and not alone" tests

unit: venv
	$(PARALLEL_TESTS)

# The whole suite in three parts: the parallel one, the serial one in two workers, then the tests marked alone.
test: venv sim-deps browser-deps lint
	$(PARALLEL_TESTS)
	$(SERIAL_TESTS)
	$(BIN)/pytest -q -ra --durations=10 -m alone tests

# Boot the embedded default (a simulated 8x RTX PRO 6000 host) and run the main job on it.
demo: venv sim-deps
	$(BIN)/python scripts/demo.py

demo-down: venv
	$(BIN)/moesweep sim down

clean:
	-$(BIN)/moesweep sim down --all
	rm -rf $(VENV) .pytest_cache .ruff_cache
