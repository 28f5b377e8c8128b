# Two commands are the contract (see README): `make lab` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# CI and this course's dev machines use a CPU build; Colab/ModelScope keep their own torch.
TORCH_SPEC ?= torch==2.13.0
PORT   ?= 8888
# Containers and Colab-like sandboxes run as root, which JupyterLab refuses unless told.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test setup system-deps cjk-font i18n clean mutation

# The installer: uv (docs.astral.sh/uv) fetches and installs the packages in parallel; a fresh clone's
# setup took under half pip's CPU time (docs/testing.md, "Setup"). It is the one on PATH, or pip puts
# it into .venv. pip installs instead where uv cannot be had, where it fails (its error is
# shown first), with `make setup INSTALLER=pip`, and in a venv that borrows the system's packages:
# uv does not see those and would fetch a second torch. uv ignores pip's configuration, so pip's
# index-url (a mirror, e.g. in mainland China) is handed to it.
INSTALLER ?= uv
UV_SPEC   ?= uv>=0.5
# `$(INSTALL) ARGS` in a recipe: install ARGS into .venv with uv, else pip (see above).
INSTALL = venv_install() { uv=""; \
  if [ "$(INSTALLER)" = uv ] && ! grep -qs "^include-system-site-packages *= *true" $(VENV)/pyvenv.cfg; then \
    uv=$$(command -v $(BIN)/uv || command -v uv || { $(BIN)/python -m pip install -q "$(UV_SPEC)" >/dev/null 2>&1 && echo $(BIN)/uv; }); \
    [ -n "$$uv" ] || echo "note: uv could not be installed; pip installs instead (slower)"; \
  fi; \
  index=$$([ -z "$$uv" ] || $(BIN)/python -m pip config list 2>/dev/null | sed -n "s/^[^ ]*\.index-url='\(.*\)'$$/\1/p" | tail -n 1); \
  { [ -n "$$uv" ] && "$$uv" pip install -q --compile-bytecode --python $(BIN)/python $${index:+--default-index "$$index"} "$$@"; } || \
  { [ -z "$$uv" ] || echo "note: uv failed (above); pip installs instead"; $(BIN)/python -m pip install -q "$$@"; }; }; venv_install

# The stamp depends on pyproject.toml so an edited dependency list re-runs the install.
# torch comes from pip, which finds a CPU build on disk where one is (pip.conf's find-links), as CI has.
# pip byte-compiles none of it; the last `import torch` compiles what every kernel imports (a third of
# torch's modules, none of sympy's: 4 CPU s, where compiling all took 47 of torch's 61). Kernels run
# with PYTHONDONTWRITEBYTECODE (so may `make`): they read .pyc files and never write them.
$(VENV)/.ready: pyproject.toml
	@if [ ! -x $(BIN)/python ]; then \
	  if $(PYTHON) -c "import torch" >/dev/null 2>&1; then \
	    echo "Using the torch already installed for $(PYTHON)"; \
	    $(PYTHON) -m venv --system-site-packages $(VENV); \
	  else \
	    $(PYTHON) -m venv $(VENV); \
	  fi; \
	fi
	@$(BIN)/python -c "import torch" >/dev/null 2>&1 || $(BIN)/python -m pip install -q --no-compile "$(TORCH_SPEC)"
	@$(INSTALL) -e ".[lab,test]"
	@$(BIN)/python -c "import sys; sys.dont_write_bytecode = False; import torch"
	@touch $@

setup: $(VENV)/.ready

# notebooks/zh from notebooks/*.ipynb + i18n/zh_CN/*.po (a stale translation is shown in English,
# and `make test` fails until it is retranslated).
# (Skipped where there are no translation files, e.g. a student bundle that ships notebooks/zh built.)
i18n: setup
	@if [ -d i18n/zh_CN ]; then $(BIN)/kvsched i18n build; fi

lab: i18n cjk-font

lab: setup
	@echo "Starting JupyterLab on notebooks/ (Ctrl-C to stop); open the URL printed below."
	$(BIN)/python -m jupyter lab --notebook-dir=notebooks --no-browser --ip=127.0.0.1 --port=$(PORT) --ServerApp.open_browser=False $(ROOT_FLAG)

# A font with Chinese glyphs, so the zh edition's figures show Chinese labels: installed with apt as
# root where none is (containers, Colab-like sandboxes); elsewhere one line says how. Idempotent, quiet.
cjk-font:
	@fc-list :lang=zh family 2>/dev/null | grep -q . || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-noto-cjk \
	  >/dev/null 2>&1; } || echo "note: no Chinese font (the zh edition's plots keep English labels): sudo apt-get install fonts-noto-cjk"

# System packages the tests exercise, installed in one apt call as root (CI containers) when
# missing: bubblewrap for the grading sandbox (`kvsched grade`), a CJK font for Chinese plot labels.
# Elsewhere it only says what is skipped. Idempotent and quiet. (.ci/run adds Chromium.)
system-deps:
	@need=""; command -v bwrap >/dev/null 2>&1 || need="$$need bubblewrap"; \
	fc-list 2>/dev/null | grep -qi "Noto Sans CJK" || need="$$need fonts-noto-cjk"; \
	[ -z "$$need" ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need \
	  >/dev/null 2>&1; } || echo "note: not installed:$$need (grading without a sandbox only; English plot labels)"

# libCacheSim for tests/test_crosscheck_libcachesim.py: the optional `crosscheck` extra (GPL-3.0,
# tests only). Installed once where pip reaches PyPI (pinned in pyproject.toml); elsewhere the test
# is skipped, with this note. CI (.ci/run) sets KVSCHED_REQUIRE_CROSSCHECK=1, so there it must run.
# (`kvsched release` drops this block with the test target: the student edition has no tests.)
.PHONY: crosscheck-deps
crosscheck-deps: setup
	@$(BIN)/python -c "import libcachesim as l, kvsched_lab.cli.bench_libcachesim as b; \
	  raise SystemExit(l.__version__ != b.LIBCACHESIM_VERSION)" >/dev/null 2>&1 \
	  || { export PIP_TIMEOUT=30 UV_HTTP_TIMEOUT=30; $(INSTALL) -e ".[crosscheck]"; } >/dev/null 2>&1 \
	  || echo "note: libcachesim not installed (tests/test_crosscheck_libcachesim.py is skipped)"

# Two workers, each taking whole test files (a file's module fixtures run once). Run alone, the
# grading tests leave a third of two cores idle while sandboxes start and stop; the other fills it.
# Files are handed out in the suite's own order, longest first (tests/conftest.py), not xdist's.
TEST_WORKERS ?= 2
test: setup system-deps crosscheck-deps
	$(BIN)/python -m pytest tests -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Mutation testing, slow and not part of `make test` (docs/testing.md). MODULE=kvsched_lab/kv/engine.py
# (or several, space-separated) runs only those; ARGS="--max-children 2" etc. go to tools/mutation.py.
MUTMUT_SPEC ?= mutmut==3.8.1
MODULE ?=
mutation: setup
	@$(BIN)/python -m pip show mutmut 2>/dev/null | grep -qx "Version: $(subst mutmut==,,$(MUTMUT_SPEC))" \
	  || $(BIN)/python -m pip install -q "$(MUTMUT_SPEC)"
	nice -n 15 $(BIN)/python tools/mutation.py $(ARGS) $(MODULE)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
