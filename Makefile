# The two commands a user needs: `make demo` and `make test`.
SHELL := /bin/bash
# tensorflow-model-optimization needs Keras 2, which tf_keras provides.
export TF_USE_LEGACY_KERAS := 1

VENV := .venv
PYTHON := $(VENV)/bin/python
# Touched only after a successful install, so a second call installs nothing.
INSTALLED := $(VENV)/.installed

.PHONY: demo test test-e2e venv engines clean bench bench-all bench-stale

venv: $(INSTALLED)

$(INSTALLED): pyproject.toml requirements/lock.txt scripts/setup_venv.sh
	bash scripts/setup_venv.sh $(VENV)
	touch $(INSTALLED)

# Apache Flink and Spark with Beam's job servers, for `distillery run --beam-runner flink|spark`
# and the engine tests: Maven and PyPI through the registries, into the engine cache
# (~/.cache/tfx-distillery/engines, or DISTILLERY_ENGINE_CACHE). Needs Java 11+ and Maven,
# and javac for a local Flink cluster whose jobs stage nothing (docs/scaling-out.md).
engines: $(INSTALLED)
	$(PYTHON) -m tfx_distillery.pipelines.beam_cluster fetch flink spark

demo: $(INSTALLED)
	DISTILLERY_HOME=$(CURDIR) $(VENV)/bin/distillery run --dataset taxi

# The test command: every test but the long end-to-end runs, on two cores: pytest-xdist,
# each test file on one worker, so that its shared set-ups run once.
test: $(INSTALLED)
	$(PYTHON) -m pytest tests -m "not e2e" -n 2 --dist loadfile

# The full check: the long end-to-end runs that `make test` leaves out. CI runs both.
# A whole run alone uses about 0.7 of a core: it waits on subprocesses, pip and Beam's
# start-up as much as it computes, so two run at once (pytest-xdist, each test module on one
# worker so that its runs are shared). Three at once were slower: each run took about twice
# as long, and the phase 2,423 s at 1f0a28c against 1,775 s for two at once, with 10 fewer tests;
# the tests whose bound is a worker's own timeout (kills, hangs) run after them, alone. The
# longest modules go first (tests/conftest.py), not xdist's most-tests-first order.
# The serial tests are collected from their own folder only (`--collect-only`: 30 s for the
# whole tree, 20-24 s for that folder; tests/test_e2e_order.py keeps every serial test in it).
SERIAL_TESTS := tests/components/distributed_trainer
test-e2e: $(INSTALLED)
	@status=0; \
	$(PYTHON) -m pytest tests -m "e2e and not serial" -n 2 --dist loadscope --no-loadscope-reorder || status=1; \
	$(PYTHON) -m pytest $(SERIAL_TESTS) -m "e2e and serial" || status=1; \
	exit $$status

# The benchmarks, each writing docs/results/<name>.json with the files it read, then
# docs/benchmarks.md from them; not part of the tests. Run them on an idle machine: the
# timings need one. `make bench` measures each experiment once, on its first seeds, all but the
# three longest (2.8 hours on 2 cores, the sum of those results' own runs). Those three,
# LONG_RUNS (5.1 hours), are the engine cost curve (12 whole runs on DirectRunner, Flink and
# Spark) and MNIST-1D's two large-teacher configurations. `make bench-all` adds them, #61's
# shipping runs other than `make demo`'s and #83's unseeded draws, one result each (SHIPPING_RUNS), #84's corpus of
# stock pipelines (CORPUS_RUNS), and the re-checks on
# held-out seeds and against the stronger baseline (14.5 hours). `make bench-stale` measures
# again only the results a change made stale. A test keeps these hours, and the README's, equal
# to the results' (a result not measured yet, results.PENDING, adds none).
BENCHMARKS := pipeline shipping-demo pruning distillation mnist1d-small compression distributed \
  ingestion scale beam_modes pipeline_parallel
LONG_RUNS := mnist1d-large-cnn mnist1d-large-mlp beam_engines
RESULTS_DIR := docs/results
RECHECKS := mnist1d-large-cnn-held-out mnist1d-large-mlp-held-out mnist1d-mlp-mixup-pseudo
SHIPPING_RUNS := shipping-csv-1x shipping-csv-10x shipping-csv-100x shipping-digits shipping-taxi \
  shipping-mnist1d shipping-stock-taxi shipping-stock-taxi-bare shipping-draws-demo shipping-draws-csv-1x shipping-draws-digits
CORPUS_RUNS := corpus-taxi corpus-taxi-sparse corpus-taxi-big-tipper corpus-penguin corpus-penguin-tuner \
  corpus-imdb corpus-iris corpus-wine corpus-breast-cancer
bench: $(INSTALLED)
	set -e; for name in $(BENCHMARKS); do $(PYTHON) -m benchmarks.recorded $$name --save --json; done
	$(PYTHON) -m benchmarks.results

bench-all: $(INSTALLED)
	set -e; for name in $(BENCHMARKS) $(LONG_RUNS) $(RECHECKS) $(SHIPPING_RUNS) $(CORPUS_RUNS); do $(PYTHON) -m benchmarks.recorded $$name --save --json; done
	$(PYTHON) -m benchmarks.results

# A second pass: a result that reads a saved one (mlp-mixup-pseudo) goes stale when the first
# pass saves what it read.
bench-stale: $(INSTALLED)
	@set -e; for pass in 1 2; do \
	  stale="$$($(PYTHON) -m benchmarks.results --list-stale --results-dir $(RESULTS_DIR))"; \
	  if [ -z "$$stale" ]; then \
	    if [ $$pass = 1 ]; then echo "bench-stale: no result is stale"; exit 0; fi; break; fi; \
	  echo "bench-stale: measuring again:" $$stale; \
	  for name in $$stale; do $(PYTHON) -m benchmarks.recorded $$name --save --json; done; \
	done; \
	$(PYTHON) -m benchmarks.results

clean:
	rm -rf runs serving
