# kswap: `make demo` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# tensorflow-cpu on machines without a GPU; `make EXTRA=gpu ...` for a GPU.
EXTRA ?= cpu

.PHONY: demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[$(EXTRA),dev]"
	touch $@

demo: $(VENV)/.installed
	$(PY) -m kswap profile --model keras.applications.MobileNetV2 --input 96,96,3 --batch 32 --top 8
	$(PY) -m kswap profile --model keras.applications.MobileNetV2 --input 96,96,3 --batch 32 --top 8 --offload all --pack

test: $(VENV)/.installed
	$(PY) -m ruff check kswap tests benchmarks examples
	$(PY) -m pytest -q

lint: $(VENV)/.installed
	$(PY) -m ruff check kswap tests benchmarks examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
