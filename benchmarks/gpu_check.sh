#!/usr/bin/env bash
# The one prepared device run (about 6-8 minutes on a machine with an NVIDIA GPU): the tests
# marked gpu, then the quick GPU benchmark with its peers (cuBLAS through torch, torch's
# ResNet-18). Prepare on this machine with `bash benchmarks/gpu_wheels.sh`, then run it
# through the device tool: command="bash benchmarks/gpu_check.sh", carry=[".whl"],
# timeout_s=540. Logs go to $OUT (or /tmp/gpu_check) and come back with the run.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD"
deps='import numpy, llvmlite, islpy, onnx, sqlite_utils, xgboost'
if ! python3 -c "$deps" 2> /dev/null && compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || { echo "gpu_check: wheel install failed"; exit 3; }
    export PYTHONPATH="$PWD:/tmp/site"
fi
python3 -c "$deps" || {
    echo "gpu_check: dependencies missing: run bash benchmarks/gpu_wheels.sh here and carry .whl"
    exit 3; }
{ nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv 2>&1
  python3 -c "import sys, llvmlite, numpy; print(sys.version.split()[0], 'llvmlite',
llvmlite.__version__, 'numpy', numpy.__version__)"
  # tensor-core kernels include <mma.h>: NVRTC needs the toolkit's headers for it
  python3 -c "from lowering.cuda.compile import compiler, toolkit_include as t
print('CUDA compiler:', compiler(), '| toolkit headers (mma.h):', t())"; } | tee "$OUT/env.txt"
timeout 240 python3 -m pytest -q -p no:cacheprovider -m gpu -x -rfE \
    tests/lowering/cuda tests/relay_ir 2>&1 | tee "$OUT/tests.txt"
timeout 330 python3 -m benchmarks.gpu --quick 2>&1 | tee "$OUT/bench.txt"
