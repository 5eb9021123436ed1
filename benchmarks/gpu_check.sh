#!/usr/bin/env bash
# The one prepared device run (a few minutes on a machine with an NVIDIA GPU): the tests
# marked gpu, then the quick GPU benchmark. Run from anywhere: bash benchmarks/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD"
python3 -c "import numpy, llvmlite, islpy, onnx" || { echo "gpu_check: dependencies missing"; exit 3; }
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv 2>/dev/null || true
timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu tests/lowering/cuda tests/relay_ir
timeout 420 python3 -m benchmarks.gpu --quick
