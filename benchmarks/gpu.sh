#!/usr/bin/env bash
# The benchmarks on a machine with an NVIDIA GPU. Run from the project root:
#   bash benchmarks/gpu.sh
# Installs kswap with tensorflow[and-cuda] into .venv-gpu, then prints the
# tables of docs/benchmarks.md measured on the real device (not emulated).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv-gpu
.venv-gpu/bin/pip install --quiet -e ".[gpu,dev]"
PY=.venv-gpu/bin/python
$PY -c "import tensorflow as tf, sys; g = tf.config.list_physical_devices('GPU'); print('GPUs:', g); sys.exit(0 if g else 1)"
$PY benchmarks/profiler_accuracy.py
$PY benchmarks/batch_scaling.py --model keras.applications.MobileNetV2 --input 96,96,3
$PY benchmarks/profiler_overhead.py --steps 5
$PY benchmarks/packing_speed.py
$PY benchmarks/packing_models.py
$PY benchmarks/offload.py --variants baseline,all,all@0,conv,remat --repeats 3
$PY benchmarks/offload.py --variants baseline,all,all@0,all+host,all@0+host --repeats 3
$PY benchmarks/training_state.py
$PY benchmarks/offload_time.py --model MobileNetV2 --rounds 25
$PY benchmarks/offload_time.py --model ResNet50 --variants baseline,all,all+host --rounds 10
