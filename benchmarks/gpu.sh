#!/usr/bin/env bash
# The benchmarks on a machine with an NVIDIA GPU. Run from anywhere:
#   bash benchmarks/gpu.sh [OUT.md]                 # default gpu-results.md
#   bash benchmarks/gpu.sh --dry-run [OUT.md]       # on CPU, tiny sizes, no GPU needed
# Installs kswap with tensorflow[and-cuda] into .venv-gpu, then runs
# benchmarks/gpu_run.py: device, copy bandwidth, the offloading table on
# ResNet50 and VGG16 at 224x224, vDNN's VGG16 at batch 256 against 12 GiB,
# the simulator against measurement (device peak and step time) and the
# exactness tests, each stage in a fresh process, within 10 minutes. It writes OUT.md, markdown for
# docs/benchmarks.md, every figure labelled with its device and command.
set -euo pipefail
cd "$(dirname "$0")/.."
DRY=()
if [[ "${1:-}" == "--dry-run" ]]; then
  DRY=(--dry-run)
  shift
fi
OUT="${1:-gpu-results.md}"
python3 -m venv .venv-gpu
.venv-gpu/bin/pip install --quiet -e ".[gpu,dev]"
PY=.venv-gpu/bin/python
if [[ ${#DRY[@]} -eq 0 ]]; then
  $PY -c "import tensorflow as tf, sys; g = tf.config.list_physical_devices('GPU'); print('GPUs:', g); sys.exit(0 if g else 1)"
fi
$PY benchmarks/gpu_run.py "${DRY[@]}" --out "$OUT"
echo "results: $OUT"
