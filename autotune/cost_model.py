"""An XGBoost cost model with a ranking objective over candidate features.

Trained on (features, throughput) of measured configs; `predict` returns scores where
higher means faster (only the order matters: the objective is rank:pairwise). Failed
candidates train as the slowest. Transfer learning: `fit_transfer(x, y, groups)` first
learns from other tasks of the same template and target, each task its own query group;
`fit` then keeps those rows with a lower weight next to the task's own.

    >>> import numpy as np
    >>> m = XGBCostModel(seed=0)
    >>> x = np.arange(40, dtype="float32").reshape(20, 2); y = x[:, 0]
    >>> m.fit(x, y); bool(m.predict(x[-1:])[0] > m.predict(x[:1])[0])
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


class XGBCostModel:
    """rank:pairwise gradient-boosted trees, nthread=1 (the other core is measuring)."""

    def __init__(self, num_rounds: int = 60, seed: int = 0, transfer_weight: float = 0.3
                 ) -> None:
        self.num_rounds = num_rounds
        self.seed = seed
        self.transfer_weight = transfer_weight
        self.params = {"objective": "rank:pairwise", "max_depth": 6, "eta": 0.3,
                       "min_child_weight": 1, "gamma": 0.0001, "subsample": 1.0,
                       "nthread": 1, "seed": seed, "verbosity": 0}
        self._booster: Any = None
        self._transfer: tuple[np.ndarray, np.ndarray, list[int]] | None = None

    @property
    def trained(self) -> bool:
        """True once fit() has seen at least two distinct scores."""
        return self._booster is not None

    def fit_transfer(self, x: np.ndarray, y: np.ndarray,
                     groups: Sequence[Any] | None = None) -> None:
        """Keep other tasks' rows (features of the same length) to train along with own.
        `groups` names each row's task: rows are ranked only against rows of their own
        task (throughputs of different shapes do not compare), one query group each."""
        if len(x) < 2:
            return
        x, y = np.asarray(x, np.float32), np.asarray(y, float)
        keys = list(groups) if groups is not None else [0] * len(x)
        order = sorted(range(len(x)), key=lambda k: str(keys[k]))
        x, y = x[order], y[order]
        sizes: list[int] = []
        for k, i in enumerate(order):
            if k == 0 or keys[i] != keys[order[k - 1]]:
                sizes.append(0)
            sizes[-1] += 1
        start = 0
        for n in sizes:  # each task's throughputs scaled by its own best
            y[start:start + n] = _normalise(y[start:start + n])
            start += n
        self._transfer = (x, y, sizes)
        self._train(x, y, sizes, [1.0] * len(sizes))

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        """Retrain on rows x with throughputs y (0 for a failed candidate)."""
        import xgboost as xgb  # noqa: F401  (fail here, clearly, when it is missing)

        x = np.asarray(x, np.float32)
        y = _normalise(np.asarray(y, float))
        if len(x) < 2 or np.ptp(y) == 0:
            return
        groups, weights = [len(x)], [1.0]
        if self._transfer is not None and self._transfer[0].shape[1] == x.shape[1]:
            # other tasks' rows form their own query groups: ranked among themselves only
            tx, ty, sizes = self._transfer
            x, y = np.concatenate([x, tx]), np.concatenate([y, ty])
            groups += sizes
            weights += [self.transfer_weight] * len(sizes)
        self._train(x, y, groups, weights)

    def _train(self, x: np.ndarray, y: np.ndarray, groups: list[int] | None = None,
               weights: list[float] | None = None) -> None:
        import xgboost as xgb

        d = xgb.DMatrix(x, label=y, nthread=1)
        d.set_group(groups or [len(x)])
        d.set_weight(np.asarray(weights or [1.0]))
        self._booster = xgb.train(self.params, d, self.num_rounds)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Scores for rows x (higher is predicted faster); zeros before any training."""
        x = np.asarray(x, np.float32)
        if self._booster is None or len(x) == 0:
            return np.zeros(len(x))
        # in-place prediction: a DMatrix per call costs milliseconds (thread start-up)
        return np.asarray(self._booster.inplace_predict(x))


def _normalise(y: np.ndarray) -> np.ndarray:
    """Throughputs scaled to [0, 1] by the best (rank labels need only the order)."""
    top = float(np.max(y)) if len(y) else 0.0
    return y / top if top > 0 else y
