#!/usr/bin/env bash
# The one prepared device run, for a bare machine with an NVIDIA GPU that reaches no package
# index: the tests marked gpu, then the GPU benchmark's sections with their peers (cuBLAS
# and cuDNN through torch, torch's ResNet-18), each step in its own process under its own
# timeout, all of them within GPU_CHECK_BUDGET seconds (default 420, counted from the
# script's start), so that one hung step cannot eat the machine's time; a step the budget
# no longer covers is skipped and says so. The steps run in order of value and cost: the
# tests (the tensor-core kernels among them) first, the peaks, the untuned layers (padded
# to tensor-core tiles, the conv), then the tuned ones (tensor-core GEMM, the chain, ...).
#
# Prepare on this machine with `bash benchmarks/gpu_wheels.sh` (the wheels the GPU image
# lacks and the CUDA headers for <mma.h>, in .whl/), then run it through the device tool:
#   command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=480
# (15 minutes of device time hold the machine's start, this run and a shorter second one:
#  command="GPU_CHECK_BUDGET=200 bash benchmarks/gpu_check.sh").
# Everything goes to stdout and to $OUT (or /tmp/gpu_check), which comes back with the run:
# env.txt (machine, versions, compiler, headers), tests.txt, bench.txt (each section's
# log), figures.txt (one line per figure or failed step), peaks.json.
# Without a GPU it says so after env.txt and stops (exit 2); without a CUDA compiler
# (neither NVRTC nor nvcc) likewise (exit 3).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check}"
mkdir -p "$OUT"
BUDGET="${GPU_CHECK_BUDGET:-420}"
START=$SECONDS
export PYTHONUNBUFFERED=1
export PYTHONPATH="$PWD"
FIGURES="$OUT/figures.txt"
: > "$FIGURES"

say() { echo "gpu_check: $*" | tee -a "$FIGURES"; }

# step NAME CAP FILE CMD...: CMD under a timeout of CAP seconds or what the budget has left,
# whichever is less; its output to stdout and appended to $OUT/FILE
step() {
    local name=$1 cap=$2 file=$3
    shift 3
    local left=$((BUDGET - (SECONDS - START)))
    if ((left < 20)); then
        say "$name: skipped, the budget of $BUDGET s is spent"
        return 124
    fi
    local limit=$((cap < left ? cap : left))
    echo "=== $name (at most $limit s; $((SECONDS - START)) s used) ===" | tee -a "$OUT/$file"
    timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$OUT/$file"
    local rc=${PIPESTATUS[0]}
    if ((rc == 124 || rc == 137)); then
        say "$name: TIMED OUT after $limit s"
    elif ((rc != 0)); then
        say "$name: exit status $rc"
    fi
    return "$rc"
}

# 1. Python packages: the image's, plus the carried wheels of what it lacks
deps='import numpy, llvmlite, islpy, onnx, sqlite_utils, xgboost'
if ! python3 -c "$deps" 2> /dev/null && compgen -G ".whl/*.whl" > /dev/null; then
    step "install the carried wheels" 120 env.txt python3 -m pip install -q --no-index \
        --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl ||
        { say "wheel install failed"; exit 3; }
    export PYTHONPATH="$PWD:/tmp/site"
fi
python3 -c "$deps" 2>&1 | tee -a "$OUT/env.txt" || {
    say "dependencies missing: run bash benchmarks/gpu_wheels.sh here and carry .whl"
    exit 3; }

# 2. the CUDA compiler: NVRTC (cuda-bindings), else nvcc; NVRTC needs the toolkit's
# headers for the tensor-core kernels' <mma.h>: the machine's, else the carried ones
if ! command -v nvcc > /dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export PATH="$PATH:/usr/local/cuda/bin"
fi
if [[ -z "$(python3 -c 'from lowering.cuda.compile import toolkit_include as t
print(t() or "")' 2> /dev/null)" && -f .whl/cuda_include/mma.h ]]; then
    export TESSEL_CUDA_INCLUDE="$PWD/.whl/cuda_include"
fi

# 3. the machine
step "environment" 60 env.txt bash -c '
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
python3 - <<EOF
import sys, llvmlite, numpy
from lowering.cuda.compile import _nvrtc, compiler, toolkit_include
from tessel_target.gpu import gpu
nv = _nvrtc()
print("python", sys.version.split()[0], "| llvmlite", llvmlite.__version__, "| numpy",
      numpy.__version__)
print("CUDA compiler:", compiler() or "none", "| NVRTC",
      ".".join(map(str, nv.nvrtcVersion()[1:])) if nv else "absent",
      "| headers for mma.h:", toolkit_include())
print("GPU:", gpu())
EOF'
if ! python3 -c 'import sys; from tessel_target.gpu import gpu; sys.exit(gpu() is None)'; then
    say "no NVIDIA GPU found (no libcuda, or no device): nothing to run or measure here;" \
        "stopping. The CUDA code itself is checked in CI by the simulator (cuda -sim)."
    exit 2
fi
if [[ -z "$(python3 -c 'from lowering.cuda.compile import compiler; print(compiler())')" ]]
then
    say "no CUDA compiler: neither NVRTC (cuda-bindings + nvidia-cuda-nvrtc) nor nvcc; stopping"
    exit 3
fi

# 4. the tests marked gpu (the padded tensor-core kernels among them)
step "tests marked gpu" 150 tests.txt python3 -m pytest -q -p no:cacheprovider -m gpu -rfE \
    tests/lowering/cuda tests/relay_ir
grep -E "passed|failed|error" "$OUT/tests.txt" | tail -1 | sed 's/^/tests marked gpu: /' \
    >> "$FIGURES"

# 5. the benchmark, a section per process, the peaks shared through peaks.json
bench() {
    step "benchmark $1" "$2" bench.txt python3 -m benchmarks.gpu --quick --sections "$1" \
        --peaks "$OUT/peaks.json" --figures "$FIGURES"
}
bench peak,peak_tensor 60
bench padded 60
bench conv 60
bench gemm_tc 110
bench chain 90
bench gemm 110
bench resnet18 120
bench gemm16 110
say "done in $((SECONDS - START)) s"
