"""The model-based tuner: an XGBoost ranking model over candidate features, and simulated
annealing over the space on the model's predictions.

Each batch takes the model's top unvisited points found by annealing, plus a share
(`eps_greedy`) of uniform random points. Until `plan_size` measurements exist (or after a
transfer model is loaded) the batch is random.

    >>> from autotune.task import Task
    >>> t = Task("matmul.x86", [((64, 64), "float32"), ((64, 64), "float32")])
    >>> len(XGBTuner(t, seed=0).next_batch(4))
    4
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from autotune.cost_model import XGBCostModel
from autotune.features import (
    LOOP_FEATURE_LEN,
    knob_features_batch,
    knob_layout,
    knob_tables,
    loop_features,
    task_context,
)
from autotune.task import Task
from autotune.tuners.base import Tuner
from tessel_errors import TesselError
from tuning_logs import MeasureRecord


class XGBTuner(Tuner):
    """Cost-model guided search.

    `feature="knob"` (default) encodes each point by its knob values: a prediction costs
    microseconds, so annealing runs `sa_chains` x `sa_steps` = 64 x 60 moves per batch.
    `feature="loop_ir"` (the tuner `xgb_loop`) describes each point by its lowered loop IR
    (autotune.features.loop_features; 10-50 ms of lowering per new point, cached), so its
    annealing is smaller, 16 x 16 moves, at most ~270 new lowerings per batch. Both learn
    by transfer from every record of the template (other shapes and models included; see
    `load_transfer`).
    Measured on matmul 1024^3 (256 trials, benchmarks.tuning): knob features reached 95% of
    the best in 110 trials, loop-IR features not within 256, at 1.4x the tuning time.
    """

    name = "xgb"

    def __init__(self, task: Task, plan_size: int = 16, eps_greedy: float = 0.1,
                 sa_chains: int | None = None, sa_steps: int | None = None,
                 seed: int | None = 0, feature: str = "knob") -> None:
        super().__init__(task, seed)
        if feature not in ("knob", "loop_ir"):
            raise TesselError(f"XGBTuner feature must be 'knob' or 'loop_ir', got {feature!r}")
        self.feature = feature
        self._loop_cache: dict[int, np.ndarray] = {}
        self._other_tasks: dict[str, Task] = {}
        self.plan_size = plan_size
        self.eps_greedy = eps_greedy
        small = feature == "loop_ir"
        self.sa_chains = sa_chains if sa_chains is not None else (16 if small else 64)
        self.sa_steps = sa_steps if sa_steps is not None else (16 if small else 60)
        self.model = XGBCostModel(seed=seed or 0)
        self.xs: list[int] = []
        self.ys: list[float] = []
        self._transferred = False

    # -- learning -------------------------------------------------------------------------
    def _learn(self, indices: list[int], flops: list[float]) -> None:
        at = {x: k for k, x in enumerate(self.xs)}
        for i, f in zip(indices, flops):
            if i in at:  # a timed-out candidate's retry (autotune.tuning): its time
                self.ys[at[i]] = f  # replaces the timeout's 0, not a second label
            else:
                at[i] = len(self.xs)
                self.xs.append(i)
                self.ys.append(f)
        if len(self.xs) >= max(2, self.plan_size // 2) or self._transferred:
            self.model.fit(self._features(self.xs), np.asarray(self.ys))

    def _features(self, indices: Sequence[int]) -> np.ndarray:
        if self.feature == "knob":
            return self._with_context(knob_features_batch(self.space, indices), self.task)
        rows = []
        for i in indices:
            if i not in self._loop_cache:
                try:
                    self._loop_cache[i] = loop_features(self.task.lower(self.space.get(i)))
                except TesselError:  # a point that does not lower: featureless, ranks last
                    self._loop_cache[i] = np.zeros(LOOP_FEATURE_LEN, np.float32)
            rows.append(self._loop_cache[i])
        return np.stack(rows) if rows else np.zeros((0, LOOP_FEATURE_LEN), np.float32)

    def load_transfer(self, records: Sequence[MeasureRecord], max_rows: int = 256) -> int:
        """Pre-train on other tasks' records of the same template; returns the rows used.

        Each record is described in its own task's space (its shapes), so records of every
        shape count: knob features are shape-relative (a split's outer count beside its
        inner factors), loop-IR features describe the record's own lowered program. A
        task whose knobs differ from this one's (another template version) is skipped. At
        most `max_rows` records, a random sample (a lowering costs 10-50 ms)."""
        recs = list(records)
        if len(recs) > max_rows:
            recs = [recs[k] for k in sorted(self.rng.choice(len(recs), max_rows,
                                                            replace=False))]
        rows, ys, groups = [], [], []
        for r in recs:
            row = self._record_features(r)
            if row is not None:
                rows.append(row)
                ys.append((r.flops or 1.0) / r.mean if r.ok and r.mean else 0.0)
                groups.append(r.workload_key)
        if len(rows) >= 2:
            self.model.fit_transfer(np.stack(rows), np.asarray(ys), groups)
            self._transferred = self.model.trained
        return len(rows)

    def _record_features(self, r: MeasureRecord) -> np.ndarray | None:
        """The feature row of another task's record, or None where it has none here."""
        try:
            task = self._other_tasks.get(r.workload_key)
            if task is None:
                task = Task.from_workload_key(r.workload_key, self.task.target)
                self._other_tasks[r.workload_key] = task
            cfg = task.config_from_json(r.config_json)
            if self.feature == "knob":
                if knob_layout(task.space) != knob_layout(self.space) or \
                        len(task_context(task.args)) != len(task_context(self.task.args)):
                    return None
                return self._with_context(knob_features_batch(task.space, [cfg.index]),
                                          task)[0]
            return loop_features(task.lower(cfg))
        except TesselError:  # a record of another template version, or one that won't lower
            return None

    @staticmethod
    def _with_context(rows: np.ndarray, task: Task) -> np.ndarray:
        """Knob rows with the task's shape context (autotune.features.task_context)."""
        ctx = task_context(task.args)
        return np.concatenate([rows, np.broadcast_to(ctx, (len(rows), len(ctx)))], axis=1)

    # -- proposing ------------------------------------------------------------------------
    def _propose(self, n: int) -> list[int]:
        if not self.model.trained:
            return self._random(n)
        n_rand = int(round(n * self.eps_greedy))
        top = self._anneal(n - n_rand)
        rand = self._random(n - len(top), self.visited | set(top))
        return top + rand

    def _anneal(self, n: int) -> list[int]:
        """The n best-predicted unvisited points met by parallel annealing chains.

        Chains live as arrays of per-knob choice indices; a move steps one knob by one."""
        if n <= 0:
            return []
        dims = np.asarray(self.space.dims(), dtype=np.int64)
        mul = np.concatenate([[1], np.cumprod(dims)[:-1]]).astype(np.int64)
        movable = np.nonzero(dims > 1)[0]
        rule = self.rule
        if rule is not None and len(rule.allowed) == 1:  # the model's block: one choice
            movable = movable[movable != rule.position]
        best_known = [self.xs[k] for k in np.argsort(self.ys)[::-1][: self.sa_chains // 2]]
        starts = best_known + self._random(self.sa_chains - len(best_known), set())
        points = np.asarray([self.space.knob_indices(p) for p in starts], dtype=np.int64)
        if rule is not None:  # a measured start (an older record) may write another block
            rule.fix(points, self.rng)
        tables = knob_tables(self.space)

        def feats(pts: np.ndarray) -> np.ndarray:
            if self.feature == "loop_ir":
                return self._features((pts * mul).sum(axis=1).tolist())
            return self._with_context(
                np.concatenate([t[pts[:, k]] for k, t in enumerate(tables)], axis=1),
                self.task)

        scores = self.model.predict(feats(points))
        best: dict[int, float] = {}

        def offer(pts: np.ndarray, ss: np.ndarray) -> None:
            for p, s_ in zip((pts * mul).sum(axis=1).tolist(), ss.tolist()):
                if p not in self.visited and s_ > best.get(p, -np.inf):
                    best[p] = s_

        offer(points, scores)
        if len(movable) == 0:
            return [p for p, _ in heapq.nlargest(n, best.items(), key=lambda kv: kv[1])]
        rows = np.arange(len(points))
        for step in range(self.sa_steps):
            temp = max(1.0 - step / self.sa_steps, 1e-3)
            knob = movable[self.rng.integers(len(movable), size=len(points))]
            delta = np.where(self.rng.random(len(points)) < 0.5, 1, -1)
            cand = points.copy()
            moved = cand[rows, knob] + delta
            moved = np.where((moved < 0) | (moved >= dims[knob]), cand[rows, knob] - delta,
                             moved)
            cand[rows, knob] = moved
            if rule is not None:
                rule.fix(cand, self.rng)
            cs = self.model.predict(feats(cand))
            spread = float(np.ptp(cs)) or 1.0
            accept = np.exp(np.minimum((cs - scores) / (spread * temp), 0.0))
            take = self.rng.random(len(cand)) < accept
            points[take], scores[take] = cand[take], cs[take]
            offer(cand, cs)
        return [p for p, _ in heapq.nlargest(n, best.items(), key=lambda kv: kv[1])]


class XGBLoopTuner(XGBTuner):
    """The xgb tuner on loop-IR features (`feature="loop_ir"`), under its own name so that
    records and plots tell the two apart: `make_tuner("xgb_loop", task)`."""

    name = "xgb_loop"

    def __init__(self, task: Task, **kwargs: object) -> None:
        kwargs.setdefault("feature", "loop_ir")
        super().__init__(task, **kwargs)  # type: ignore[arg-type]
