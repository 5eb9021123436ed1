#!/usr/bin/env bash
# Prepare, on this machine (which reaches a package index), everything benchmarks/gpu_check.sh
# needs on the GPU machine (which reaches none), in the one git-ignored folder .whl/ that
# the device tool carries with the working tree:
#   - wheels, for that machine's CPython 3.12, of what its image lacks: islpy, xgboost-cpu,
#     sqlite-utils (with sqlite-fts4 and click-default-group); it has numpy, llvmlite,
#     onnx, torch, pytest, hypothesis, cuda-bindings, nvidia-cuda-nvrtc and nvcc 13.0;
#   - .whl/cuda_include/: the CUDA headers NVRTC needs for <mma.h> (tensor-core kernels),
#     copied from this machine's toolkit; gpu_check.sh points NVRTC at them
#     (TESSEL_CUDA_INCLUDE) when the GPU machine's own toolkit has none.
# NVRTC itself does not travel: the nvidia-cuda-nvrtc wheel is 90 MB, over the 64 MiB the
# tool carries in all; the image's NVRTC (cuda-bindings) compiles, else its nvcc, and the
# kernels launch through ctypes on the driver's libcuda (no wheel). Nor does llvmlite: the
# image's serves, since the GPU path never JITs with LLVM (the test models and ResNet-18
# build for cuda with the LLVM JIT disabled).
# Then it checks what it made: the wheels install for CPython 3.12 on manylinux (pip
# --dry-run), NVRTC here compiles a tensor-core kernel with the carried headers alone, and
# the working tree plus .whl fit the 64 MiB.
#   bash benchmarks/gpu_wheels.sh
#   device run: command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=480
set -euo pipefail
cd "$(dirname "$0")/.."
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
           --platform manylinux1_x86_64)
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${PLATFORMS[@]}" -d .whl \
    islpy xgboost-cpu sqlite-utils sqlite-fts4 click-default-group 2>&1 | grep -v '^WARNING' || true

# the headers <mma.h> pulls in under NVRTC (found by compiling with NVRTC and adding each
# header it missed; the rest of mma.h's includes are for host compilers only)
HEADERS=(mma.h crt/mma.h crt/mma.hpp cuda_fp16.h cuda_fp16.hpp cuda_bf16.h cuda_bf16.hpp)
toolkit=$(env -u TESSEL_CUDA_INCLUDE python3 -c \
    "from lowering.cuda.compile import toolkit_include as t; print(t() or '')")
if [[ -z "$toolkit" ]]; then
    echo "gpu_wheels: no CUDA toolkit headers here (mma.h): install the toolkit or set CUDA_HOME"
    exit 3
fi
rm -rf .whl/cuda_include
for h in "${HEADERS[@]}"; do
    mkdir -p ".whl/cuda_include/$(dirname "$h")"
    cp "$toolkit/$h" ".whl/cuda_include/$h"
done
echo "headers for <mma.h> from $toolkit ($(nvcc --version 2>/dev/null | tail -1 || true)):"
(cd .whl/cuda_include && find . -type f | sort | sed 's|^\./|  |')

echo "checks:"
# pip checks the tags against the given Python, Requires-Python against its own: the
# latter by hand, for the GPU machine's 3.12.3
python3 -m pip install -q --dry-run --no-index --no-deps --ignore-installed \
    --ignore-requires-python --target /tmp/gpu_wheels_dry_run --only-binary=:all: \
    --python-version 3.12 --implementation cp "${PLATFORMS[@]}" .whl/*.whl
python3 - .whl/*.whl <<'EOF'
import sys
import zipfile
from email.parser import Parser

from packaging.specifiers import SpecifierSet

for path in sys.argv[1:]:
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        needs = Parser().parsestr(z.read(meta).decode()).get("Requires-Python") or ""
    if not SpecifierSet(needs).contains("3.12.3"):
        sys.exit(f"gpu_wheels: {path} needs Python {needs}, the GPU machine has 3.12.3")
EOF
echo "  the wheels install for CPython 3.12 (manylinux x86-64): $(ls .whl/*.whl | wc -l) wheels"
TESSEL_CUDA_INCLUDE="$PWD/.whl/cuda_include" python3 - <<'EOF'
from lowering.cuda import compile as C

if C._nvrtc() is None:
    print("  NVRTC is not installed here: the carried headers are not checked")
else:
    import lowering
    from schedule.templates import instantiate

    assert C.toolkit_include().endswith(".whl/cuda_include"), C.toolkit_include()
    args = [((17, 50), "float16"), ((33, 50), "float16")]
    s, tensors = instantiate("dense_tensorcore.cuda", args, target="cuda")
    from lowering.cuda.codegen import generate

    program = generate(lowering.lower(s, tensors), "sm_90")
    ptx, cubin = C._with_nvrtc(program.source, "sm_90")
    assert "wmma.mma.sync" in ptx and cubin[:4] == b"\x7fELF"
    print("  NVRTC compiles a tensor-core kernel (sm_90) with the carried headers alone")
EOF
tree=$(git ls-files -co --exclude-standard -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
carried=$(du -sb .whl | cut -f1)
total=$((tree + carried))
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "  travels: working tree $(mib "$tree") + .whl $(mib "$carried") = $(mib "$total") of 64 MiB"
if ((total > 64 * 1048576)); then
    echo "gpu_wheels: over the 64 MiB the device tool carries"
    exit 4
fi
