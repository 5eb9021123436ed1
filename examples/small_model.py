"""Write a small ONNX CNN (a narrow ResNet-18 on 64x64 images, random weights) to a file.

The README's main job tunes and compiles it: `python3 -m examples.small_model small.onnx`.
"""

from __future__ import annotations

import argparse

import onnx

from tests.e2e.onnx_models import resnet18


def main() -> None:
    """Write the model: `python3 -m examples.small_model small.onnx`."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("path", nargs="?", default="small_resnet.onnx")
    ap.add_argument("--image", type=int, default=64)
    ap.add_argument("--width", type=int, default=16)
    args = ap.parse_args()
    onnx.save(resnet18(image=args.image, width=args.width, classes=10), args.path)
    print(f"wrote {args.path} (ResNet-18 layout, width {args.width}, {args.image}x{args.image})")


if __name__ == "__main__":
    main()
