# The two commands a user needs: `make demo` and `make test`.
SHELL := /bin/bash
# tensorflow-model-optimization needs Keras 2, which tf_keras provides.
export TF_USE_LEGACY_KERAS := 1

VENV := .venv
PYTHON := $(VENV)/bin/python
# Touched only after a successful install, so a second call installs nothing.
INSTALLED := $(VENV)/.installed

.PHONY: demo test venv clean bench

venv: $(INSTALLED)

$(INSTALLED): pyproject.toml requirements/lock.txt scripts/setup_venv.sh
	bash scripts/setup_venv.sh $(VENV)
	touch $(INSTALLED)

demo: $(INSTALLED)
	DISTILLERY_HOME=$(CURDIR) $(VENV)/bin/distillery run --dataset taxi

test: $(INSTALLED)
	$(PYTHON) -m pytest tests

# Every benchmark, each writing docs/results/<name>.json with the files it read, then
# docs/benchmarks.md from them. Long (about 9 hours on 2 cores); not part of `make test`.
# Run it on an idle machine: the timings need one.
BENCHMARKS := ingestion distributed compression pipeline beam_modes scale pruning distillation mnist1d \
  mnist1d_large mnist1d_held_out mnist1d_large_mlp mnist1d_mlp_held_out mnist1d_mlp_mixup_pseudo
bench: $(INSTALLED)
	set -e; for name in $(BENCHMARKS); do $(PYTHON) -m benchmarks.recorded $$name --save --json; done
	$(PYTHON) -m benchmarks.results

clean:
	rm -rf runs serving
