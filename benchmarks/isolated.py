"""Each peer runtime in its own process: a `Peer` starts a spawned process that builds its
runs once (`setup(*args)` -> {key: callable}), then on request runs one of them (its
output comes back for checking) or times it (the median seconds come back as a number).

Why: runtimes in one process share more than the cores (their pool threads spin after a
run, thread placement, allocator), and a 3x3 conv had read 134-174 GFLOP/s in
benchmarks.conv_layers against 322-362 alone (2 threads, Sapphire Rapids). In separate
processes only one peer is asked at a time and the others wait on a pipe. What stays: on
the 2-vCPU machines here, two threads swing between two cores' speed and one core's over
seconds, with nothing else running and both threads on CPU (one process, 64@56 3x3 at 2
threads: 780 us five runs in a row, then 1372 and 1336, cpu/wall 2.1 in all; 1 thread: 1360
us; Sapphire Rapids VM, load 0.4): two-thread figures here are bimodal whatever the peer, so
compare only interleaved figures over several rounds, note the load, and do kernel work at
one thread by CPU time.

    >>> from benchmarks.conv_layers import ort_setup             # doctest: +SKIP
    >>> with Peer("onnxruntime", ort_setup, {0: conv}, {0: x}, 2) as p:  # doctest: +SKIP
    ...     y, seconds = p.run("0"), p.time("0", repeat=20, warmup=3)

`setup` must be a module-level function (the child imports it by name); its arguments
are pickled to the child.
"""

from __future__ import annotations

import multiprocessing as mp
import traceback
from collections.abc import Callable
from typing import Any

from benchmarks.models import median_seconds


def _serve(conn: Any, setup: Callable[..., dict[str, Callable[[], Any]]],
           args: tuple[Any, ...]) -> None:
    """The child: build the runs, then answer ("run", key), ("time", key, repeat, warmup)
    and ("stop",) until stopped; every answer is ("ok", value) or ("error", text)."""
    try:
        runs = setup(*args)
        conn.send(("ok", sorted(runs)))
    except BaseException:  # noqa: BLE001 - reported to the parent, which stops
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        try:
            fn = runs[msg[1]]
            if msg[0] == "run":
                conn.send(("ok", fn()))
            else:
                conn.send(("ok", median_seconds(fn, msg[2], msg[3])))
        except BaseException:  # noqa: BLE001
            conn.send(("error", traceback.format_exc()))


class Peer:
    """One runtime in a spawned process (see the module docstring)."""

    def __init__(self, name: str, setup: Callable[..., dict[str, Callable[[], Any]]],
                 *args: Any, timeout: float = 3600.0) -> None:
        ctx = mp.get_context("spawn")  # a fork would copy the parent's thread pools' state
        self.name, self.timeout = name, timeout
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, setup, args), daemon=True,
                                 name=f"peer {name}")
        self._proc.start()
        child.close()
        self._keys: list[str] | None = None

    def _answer(self, what: str) -> Any:
        if not self._conn.poll(self.timeout):
            self.close()
            raise SystemExit(f"peer {self.name!r}: no answer to {what} in {self.timeout:.0f} s")
        try:
            status, value = self._conn.recv()
        except EOFError:
            raise SystemExit(f"peer {self.name!r} died during {what} (exit code "
                             f"{self._proc.exitcode})") from None
        if status != "ok":
            self.close()
            raise SystemExit(f"peer {self.name!r} failed during {what}:\n{value}")
        return value

    def keys(self) -> list[str]:
        """The runs the peer built (waits for its setup)."""
        if self._keys is None:
            self._keys = self._answer("setup")
        return self._keys

    def run(self, key: str) -> Any:
        """Run `key` once in the peer; its result, pickled back."""
        self.keys()
        self._conn.send(("run", key))
        return self._answer(f"run {key!r}")

    def time(self, key: str, repeat: int, warmup: int) -> float:
        """Median seconds of `key` over `repeat` calls after `warmup`, timed in the peer."""
        self.keys()
        self._conn.send(("time", key, repeat, warmup))
        return float(self._answer(f"timing {key!r}"))

    def close(self) -> None:
        """Stop the peer's process."""
        if self._proc.is_alive():
            try:
                self._conn.send(("stop",))
            except (BrokenPipeError, OSError):
                pass
            self._proc.join(5)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join()
        self._conn.close()

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["Peer"]
