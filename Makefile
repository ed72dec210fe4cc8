# On a fresh machine: `make run` (the main job, offline) and `make test` (the suite). Both set up .venv first.
PY := .venv/bin/python
# --system-site-packages lets a GPU image's own torch serve; VENV_FLAGS= gives a bare venv
VENV_FLAGS ?= --system-site-packages

.venv/ready: requirements.txt pyproject.toml
	@echo "setup: a virtual environment in .venv, then torch and the pinned packages (pip's lines below)"
	python3 -m venv $(VENV_FLAGS) .venv
	# torch: the machine's own (a GPU image's CUDA build), else the CPU wheel; then the pins and this project,
	# torch held where it is (install.py refuses if pip would replace it)
	$(PY) install.py --cpu-torch
	touch $@
	@echo "setup: done"

# the optional extra for --executor ray (CI installs it, so that the Ray tests run there)
.venv/ray: .venv/ready
	$(PY) -m pip install -e '.[ray]'
	touch $@

ray: .venv/ray

# the optional extra for --source openenv (CI installs it, so that the OpenEnv tests run there)
.venv/openenv: .venv/ready
	$(PY) -m pip install -e '.[openenv]'
	touch $@

openenv: .venv/openenv

run: .venv/ready
	$(PY) -m proof run --preset smoke

# the suite without its exhaustive variants (within 5 minutes on 2 cores); CI runs both targets
test: .venv/ready
	$(PY) -m pytest -q -m "not slow"

test-slow: .venv/ready
	$(PY) -m pytest -q -m slow

# the tests that read the tiny model's outputs, again on a tiny built from another seed in a fresh cache:
# a test that holds only for the tokens one build produces on one processor fails here (CI runs it)
NUMERICS := tests/shortlist/test_engine.py tests/shortlist/test_sampling.py tests/shortlist/test_screening.py \
	tests/shortlist/test_hf_internals.py tests/shortlist/test_tiny.py tests/proof/test_trl_internals.py \
	tests/proof/test_fast_grpo.py tests/proof/test_train.py
test-second-build: .venv/ready
	cache=$$(mktemp -d) && SHORTLIST_CACHE=$$cache SHORTLIST_TINY_SEED=1 $(PY) -m pytest -q -m "not slow" $(NUMERICS); \
	  rc=$$?; rm -rf $$cache; exit $$rc

.PHONY: run test test-slow test-second-build ray openenv
