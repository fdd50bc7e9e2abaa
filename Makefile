# kswap: `make demo` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# tensorflow-cpu on machines without a GPU; `make EXTRA=gpu ...` for a GPU.
EXTRA ?= cpu
# Test processes (pytest-xdist); each test module runs whole in one of them.
TEST_JOBS ?= 2

.PHONY: demo test lint bench clean

# keras-hub (benchmarks/zoo.py builds its backbones from small configs) goes in
# without its dependencies: its tensorflow-text requirement pulls the full
# tensorflow wheel, which would overwrite tensorflow-cpu. What it imports is
# installed by name; none of it depends on TensorFlow.
KERAS_HUB := keras-hub==0.32.0
KERAS_HUB_DEPS := "kagglehub!=1.0.1" kagglesdk==0.1.28 regex rich absl-py packaging numpy \
	tokenizers sentencepiece

$(VENV)/.installed: pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRA),dev,plot]"
	$(PY) -m pip install --quiet --no-deps "$(KERAS_HUB)"
	$(PY) -m pip install --quiet $(KERAS_HUB_DEPS)
	touch $@

# MobileNetV2 at 160x160, batch 32, trained three ways (plain, offloaded, with
# AutoTune), each in a fresh process; the table, charts and logdir go to demo/.
demo: $(VENV)/.installed
	$(PY) -m kswap demo --out demo

test: $(VENV)/.installed
	$(PY) -m ruff check kswap tests benchmarks examples
	$(PY) -m pytest -q -n $(TEST_JOBS) --dist loadgroup --durations=15

lint: $(VENV)/.installed
	$(PY) -m ruff check kswap tests benchmarks examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache demo
