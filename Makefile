# Two entry points, both self-contained on a fresh machine with Python 3.11+ and make:
#   make book   build the website with every chapter executed
#   make test   unit tests, every chapter under nbval, a strict build, browser checks
# For a course:
#   make book-student   the website without solutions, in _build/student/html
#   make lab            students: JupyterLab on the student notebooks (no solutions),
#                       generated into $(STUDENT_NOTEBOOKS)
#   make lab-instructor instructors: JupyterLab on the chapters, solutions included
# The Chinese edition (tools/i18n.py): `make translations` after an English change,
# `make book` builds the Chinese pages too; `make book-zh` rebuilds them alone (it reuses
# the English build's executed notebooks).
# And:
#   make pdf    the whole book as one PDF, _build/pdf/book.pdf (installs TeX Live if missing)
#   make pdf-zh the Chinese book as one PDF, _build/pdf/book-zh.pdf (after `make book`)
#   make format reformat the chapters' code cells (ruff, 80 columns)
# Every build executes each chapter at most once, into the jupyter-cache _build/.jupyter_cache
# (book/_ext/editions.py), and every edition reads the outputs from there.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: book book-student lab lab-instructor test pdf pdf-zh format clean translations book-zh translation-stats

$(STAMP): requirements.txt requirements-nodeps.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps \
		-r requirements-nodeps.txt
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

# The Chinese pages come with it (the language switch on every page points at them); they
# read the English build's executed notebooks and take about a minute more.
book: $(STAMP)
	$(BIN)/jupyter-book build -W -n --keep-going --all .
	$(MAKE) --no-print-directory book-zh
	@echo "Open the book: $(CURDIR)/_build/html/index.html"

# Same configuration as `book`, with MHACORE_EDITION=student (book/_ext/student_edition.py).
STUDENT_OUT ?= _build/student
book-student: $(STAMP)
	rm -rf $(STUDENT_OUT)
	MHACORE_EDITION=student $(BIN)/jupyter-book build -W -n --keep-going --all \
		--path-output $(STUDENT_OUT) .
	mv $(STUDENT_OUT)/_build/html $(STUDENT_OUT)/html
	@echo "Open the student site: $(abspath $(STUDENT_OUT))/html/index.html"

# JupyterLab with jupytext and jupyterlab-myst: the MyST chapters open as notebooks.
# As root (a container, a lab image) Jupyter refuses to start without --allow-root.
# The nbgrader extensions are for the instructor's course folder: off here.
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings
STUDENT_NOTEBOOKS ?= _build/student-notebooks
NBG := nbgrader.server_extensions
NO_NBGRADER := --ServerApp.jpserver_extensions="{'$(NBG).formgrader': False, \
	'$(NBG).assignment_list': False, '$(NBG).course_list': False, \
	'$(NBG).validate_assignment': False}"
LAB = mkdir -p $(LAB_SETTINGS) && \
	printf '%s\n' '{"@jupyterlab/docmanager-extension:plugin": {"defaultViewers": {"markdown": "Jupytext Notebook", "myst": "Jupytext Notebook"}}}' > $(LAB_SETTINGS)/overrides.json && \
	$(BIN)/jupyter lab $(if $(filter 0,$(shell id -u)),--allow-root) $(NO_NBGRADER)
lab: $(STAMP)
	$(BIN)/python -m mhacore teach student --out $(STUDENT_NOTEBOOKS)
	$(LAB) --ServerApp.root_dir=$(abspath $(STUDENT_NOTEBOOKS))

lab-instructor: $(STAMP)
	$(LAB) --ServerApp.root_dir=$(CURDIR) book

translations: $(STAMP)
	$(BIN)/python tools/i18n.py pot
	$(BIN)/python tools/i18n.py update
	$(BIN)/python tools/i18n.py stats

translation-stats: $(STAMP)
	$(BIN)/python tools/i18n.py stats

book-zh: $(STAMP)
	$(BIN)/python tools/i18n.py html
	@mkdir -p _build/html && ln -sfn ../zh/html _build/html/zh
	@echo "Open the Chinese book: $(CURDIR)/_build/html/zh/index.html"

test: $(STAMP)
	$(BIN)/python -m pytest

pdf: $(STAMP)
	.ci/install-debian pdf
	$(BIN)/jupyter-book build -W -n --keep-going --builder pdflatex .
	mkdir -p _build/pdf
	cp _build/latex/book.pdf _build/pdf/book.pdf
	if [ -d _build/html ]; then cp _build/pdf/book.pdf _build/html/book.pdf; fi
	@echo "The book as a PDF: $(CURDIR)/_build/pdf/book.pdf"

pdf-zh: $(STAMP)
	.ci/install-debian pdf pdf-zh
	$(BIN)/python tools/i18n.py pdf
	if [ -d _build/html ]; then cp _build/pdf/book-zh.pdf _build/html/book-zh.pdf; fi

format: $(STAMP)
	$(BIN)/python .ci/format_chapters.py book/*.md

clean:
	rm -rf _build
