# pykaf developer commands. Every target does its own set-up: a venv in .venv,
# pykaf installed into it (editable) with the Cython codec compiled in place.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BASE_STAMP := $(VENV)/.pykaf-base-installed
STAMP := $(VENV)/.pykaf-installed
EXT_STAMP := $(VENV)/.pykaf-ext-built
PYTEST_ARGS ?=
PYTEST_WORKERS ?= 2

.PHONY: help install ext kafka test test-brokers lint docs unit demo bench bench-check bench-page dist clean

help:
	@echo "make demo         run the demo (produce 1M records to an embedded Tansu, read back, report)"
	@echo "make test         lint, type-check, check the import contracts, build the docs, run the whole suite"
	@echo "make kafka        fetch Apache Kafka's jars (Maven Central, once) into ~/.cache/pykaf or PYKAF_KAFKA_HOME"
	@echo "make test-brokers run the compatibility suite (tests/brokers) on every Kafka release, redraw docs/compatibility.md"
	@echo "make docs         build the docs site into site/ (mkdocs, warnings are errors)"
	@echo "make dist         build the sdist and the manylinux wheel into dist/ (docs/releasing.md)"
	@echo "make bench        run bench/ against the peers: print the ratios, save the run and its charts in bench/results/"
	@echo "make bench-check  compare the pykaf/peer ratios with bench/baseline.json"
	@echo "make bench-page   write docs/benchmarks.md's tables and charts from the committed runs"

# The venv with pykaf (editable) and what the demo needs: no more, so that
# `make demo` on a fresh machine does not download Spark and the test tools.
$(BASE_STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip setuptools wheel "Cython>=3.0.10"
	# setuptools' default editable mode; pyproject's package-dir makes it put
	# the checkout on sys.path, where PySpark's search finds pyspark_pykaf.
	$(PY) -m pip install -q --no-build-isolation -e ".[demo]"
	touch $(BASE_STAMP)

# Everything else the suite, the benchmarks, the linters and the docs use.
$(STAMP): $(BASE_STAMP)
	$(PY) -m pip install -q --no-build-isolation -e ".[demo,test,bench,lint,spark,docs,release]"
	touch $(STAMP)

# Rebuild the extension in place whenever the Cython source changes.
$(EXT_STAMP): $(BASE_STAMP) pykaf/_codec.pyx
	$(PY) setup.py -q build_ext --inplace
	touch $(EXT_STAMP)

install: $(EXT_STAMP) $(STAMP)

lint: install
	$(VENV)/bin/ruff check pykaf pyspark_pykaf tests bench tools docs/examples
	$(VENV)/bin/ruff format --check pykaf pyspark_pykaf tests bench tools docs/examples
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict docs/examples
	$(VENV)/bin/lint-imports

# Apache Kafka (the suite's primary broker): its jars from Maven Central with
# mvn, once, into ~/.cache/pykaf/kafka-<version> (or PYKAF_KAFKA_HOME if set).
# Fails, naming what to install, without java or mvn.
kafka: install
	$(PY) -m pykaf.testing kafka --fetch

# The docs site (mkdocs.yml): a broken link, a missing anchor or a page left
# out of the nav fails the build. The site goes to site/ (git ignores it).
docs: install
	$(VENV)/bin/mkdocs build --strict --site-dir site

# Two pytest-xdist workers (PYTEST_WORKERS), each with its own brokers: the
# suite mostly waits on brokers, so two workers cut it by 40% on two cores.
# loadfile: each file's tests run in one worker, in order (a few tests read
# what an earlier test of their file left in the session's brokers).
# pytest exits 5 when it collected no test; treat that as a failure of its own
# kind with a clear message instead of a silent pass.
# make dist first: tests/test_wheel.py installs and runs the wheel it built
# (PYKAF_DIST_DIR) instead of building its own.
test: lint docs kafka dist
	PYKAF_DIST_DIR=$(CURDIR)/dist $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

# The compatibility suite (tests/brokers) on every release of
# pykaf.testing.KAFKA_RELEASES (3.7 to 4.4), one release at a time, serially
# (each release's jars are fetched once into ~/.cache/pykaf). Each run merges
# its outcome per feature into tests/brokers/results.json, and
# docs/compatibility.md is drawn from it. `make test` runs the same suite on
# the default release only. KAFKA_VERSIONS="3.9.1 4.4.0" picks releases.
COMPAT_RESULTS := tests/brokers/results.json
KAFKA_VERSIONS ?=
test-brokers: install
	@versions="$(KAFKA_VERSIONS)"; \
	if [ -z "$$versions" ]; then \
		versions=$$($(PY) -c 'from pykaf.testing import KAFKA_RELEASES; print(*KAFKA_RELEASES)'); \
	fi; \
	failed=""; \
	for v in $$versions; do \
		echo "== the compatibility suite on Apache Kafka $$v"; \
		PYKAF_KAFKA_VERSION=$$v PYKAF_BROKERS_RESULTS=$(COMPAT_RESULTS) \
			$(PY) -m pytest -p no:cacheprovider $(wildcard tests/brokers/test_compat_*.py) $(PYTEST_ARGS) \
			|| failed="$$failed $$v"; \
	done; \
	$(PY) tools/gen_compat_docs.py $(COMPAT_RESULTS) docs/compatibility.md; \
	if [ -n "$$failed" ]; then echo "the compatibility suite failed on:$$failed"; exit 1; fi

demo: $(EXT_STAMP)
	$(PY) -m pykaf.demo

# The release files (docs/releasing.md): an sdist, and the wheel built from it
# with the Cython codec compiled, repaired to a manylinux tag by auditwheel;
# both checked for LICENSE, NOTICE and the type stubs, the build for compiler
# warnings (tools/build_dist.py). Build requirements come fresh from PyPI.
dist: $(STAMP)
	$(PY) tools/build_dist.py --outdir dist

bench: install
	$(PY) -m pytest bench --benchmark-only --benchmark-json=bench/results/latest.json -p no:randomly
	$(PY) bench/ratios.py bench/results/latest.json
	$(PY) tools/plot_bench.py bench/baseline.json bench/results/ratios.json --out bench/results/img

# docs/benchmarks.md's tables and charts, from the committed run files
# (bench/baseline.json, bench/runs/*.json); a test fails when they are not current.
bench-page: install
	$(PY) tools/bench_page.py

bench-check: install
	$(PY) -m pytest bench --benchmark-only --benchmark-json=bench/results/latest.json -p no:randomly
	$(PY) bench/ratios.py bench/results/latest.json --check bench/baseline.json

clean:
	rm -rf $(VENV) build dist site pykaf/*.so pykaf/_codec.c .pytest_cache .mypy_cache .ruff_cache
