"""Imported by a measurement worker in a test: the reference is shifted by one, so every
checked candidate must come back as wrong_result."""

from __future__ import annotations

from typing import Any

import autotune.measure as M

_real = M._reference


def _shifted(*args: Any, **kwargs: Any) -> Any:
    return [r + 1.0 for r in _real(*args, **kwargs)]


M._reference = _shifted
