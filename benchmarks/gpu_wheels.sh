#!/usr/bin/env bash
# Fetch, on this machine, the wheels the GPU machine lacks (its image has numpy, llvmlite,
# onnx, onnxruntime, torch, cuda-bindings, nvidia-cuda-nvrtc, pytest and hypothesis, but
# not islpy, xgboost or sqlite-utils), for its Python 3.12, into .whl/ (git-ignored).
# benchmarks/gpu_check.sh installs them from there; the device tool carries the folder:
#   bash benchmarks/gpu_wheels.sh
#   device run: command="bash benchmarks/gpu_check.sh", carry=[".whl"], timeout_s=540
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d .whl \
    islpy xgboost-cpu sqlite-utils sqlite-fts4 click-default-group
ls -la .whl
du -sh .whl
