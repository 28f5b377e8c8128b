# Two commands are the contract (see README): `make lab` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# CI and this course's dev machines use a CPU build; Colab/ModelScope keep their own torch.
TORCH_SPEC ?= torch==2.13.0
PORT   ?= 8888
# Containers and Colab-like sandboxes run as root, which JupyterLab refuses unless told.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: lab test setup sandbox-deps clean

# The stamp depends on pyproject.toml so an edited dependency list re-runs the install.
$(VENV)/.ready: pyproject.toml
	@if [ ! -x $(BIN)/python ]; then \
	  if $(PYTHON) -c "import torch" >/dev/null 2>&1; then \
	    echo "Using the torch already installed for $(PYTHON)"; \
	    $(PYTHON) -m venv --system-site-packages $(VENV); \
	  else \
	    $(PYTHON) -m venv $(VENV); \
	  fi; \
	fi
	@$(BIN)/python -c "import torch" >/dev/null 2>&1 || $(BIN)/python -m pip install -q "$(TORCH_SPEC)"
	$(BIN)/python -m pip install -q -e ".[lab,test]"
	@touch $@

setup: $(VENV)/.ready

lab: setup
	@echo "Starting JupyterLab on notebooks/ (Ctrl-C to stop); open the URL printed below."
	$(BIN)/python -m jupyter lab --notebook-dir=notebooks --no-browser --ip=127.0.0.1 --port=$(PORT) --ServerApp.open_browser=False $(ROOT_FLAG)

# `kvsched grade` runs learner code in a bubblewrap sandbox. As root on Debian/Ubuntu (CI), install
# it when missing so the sandbox itself is exercised; elsewhere say what is skipped. Idempotent.
sandbox-deps:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  apt-get update -qq >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap \
	  >/dev/null 2>&1; } || echo "note: bubblewrap (bwrap) is not installed; the grading sandbox checks are skipped"

test: setup sandbox-deps
	$(BIN)/python -m pytest tests

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
