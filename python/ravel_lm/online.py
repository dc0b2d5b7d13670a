"""A River-style online learner over named features, on ravel's running statistics.

`Learner.learn_one(x, y)` folds one row (a dict of feature name to number) into the running
averages; `predict_one(x)` reads the model of every row so far, extracted when a row has come
since the last prediction. Rows are exact, not approximate, updates: after any rows the model
is the batch model on those rows (OLS, Lasso, ... as ravel's estimators define them). A name
never seen before widens the statistics: the rows before it held it as 0, as River's linear
models take a missing feature. `learn_many(X, y)` folds a data frame's rows one at a time in
the native module, so it equals looping `learn_one` over them to the bit (River's own
`learn_many` is not equivalent: River #996, #1912).

With River installed the learner is a `river.base.MiniBatchRegressor`, so it goes into River's
pipelines and `river.evaluate.progressive_val_score`; without River it works alone.
"""

from __future__ import annotations

import json
import math

import numpy as np

from ._model import Model
from ._native import Stats

try:  # River is optional: the learner only needs its base class to join River's pipelines.
    from river import base as _river_base

    _Base = _river_base.MiniBatchRegressor
except ImportError:  # pragma: no cover - exercised where River is absent
    _Base = object

_PENALIZED = ("lasso", "elastic-net", "mcp", "scad")
_K_FAMILY = ("olsth", "fsa", "iht", "htp")


class Learner(_Base):
    """An online linear regressor: `method` is any of ravel's ("ols", "ridge", "lasso",
    "elastic-net", "mcp", "scad", "olsth", "fsa", "iht", "htp") with its `k` or `lam`
    (a sparse method given neither selects by EBIC along its path); `schedule` weighs the
    rows ("plain": every row alike; "fixed:0.01", "floor:0.001" forget)."""

    def __init__(
        self,
        method: str = "ols",
        k: int | None = None,
        lam: float | None = None,
        l1_ratio: float | None = None,
        gamma: float | None = None,
        standardize: bool = True,
        schedule: str = "plain",
    ):
        self.method = method
        self.k = k
        self.lam = lam
        self.l1_ratio = l1_ratio
        self.gamma = gamma
        self.standardize = standardize
        self.schedule = schedule
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._stats: Stats | None = None
        self._model: Model | None = None

    # --- the request -------------------------------------------------------------
    def _request(self) -> dict:
        req: dict = {"method": self.method, "standardize": bool(self.standardize)}
        for key, value in (
            ("k", self.k),
            ("lambda", self.lam),
            ("l1_ratio", self.l1_ratio),
            ("gamma", self.gamma),
        ):
            if value is not None:
                req[key] = value
        if self.method == "ridge" and "lambda" not in req:
            req["lambda"] = 1.0
        n = self._stats.n
        if self.method in _K_FAMILY and "k" not in req:
            req["k"] = max(1, min(300, len(self._names), n // 2))
            req["select"] = "ebic"
        if self.method in _PENALIZED and "k" not in req and "lambda" not in req:
            req["select"] = "ebic"
        return req

    # --- features ----------------------------------------------------------------
    def _widen(self, names) -> None:
        new = [n for n in names if n not in self._index]
        if not new:
            return
        for name in new:
            self._index[name] = len(self._names)
            self._names.append(name)
        if self._stats is None:
            self._stats = Stats(len(self._names), "regression", self.schedule)
        else:
            self._stats.widen(len(self._names))

    def _row(self, x: dict) -> np.ndarray:
        row = np.zeros(len(self._names))
        for name, value in x.items():
            j = self._index.get(name)
            if j is not None:
                row[j] = float(value)
        return row

    # --- River's interface --------------------------------------------------------
    def learn_one(self, x: dict, y: float) -> None:
        """Folds one row in (new feature names widen the statistics)."""
        self._widen(list(x))
        if self._stats is None:  # a row without features: nothing to learn from
            return
        self._stats.update_rows(self._row(x)[None, :], np.array([float(y)]))
        self._model = None

    def learn_many(self, X, y) -> None:
        """Folds a data frame's rows in, one at a time: exactly looping `learn_one`."""
        self._widen([str(c) for c in X.columns])
        if self._stats is None or len(X) == 0:
            return
        cols = [str(c) for c in X.columns]
        rows = np.zeros((len(X), len(self._names)))
        rows[:, [self._index[c] for c in cols]] = X.to_numpy(dtype=float)
        self._stats.update_rows(rows, np.ascontiguousarray(y, dtype=float))
        self._model = None

    def model(self) -> Model | None:
        """The model of every row so far (None before the first row)."""
        if self._stats is None or self._stats.n == 0:
            return None
        if self._model is None:
            doc = self._stats.model(json.dumps(self._request()), list(self._names))
            self._model = Model.from_json(json.loads(doc))
        return self._model

    def predict_one(self, x: dict) -> float:
        """b0 + sum of b_j x_j over the known features (0 before the first row)."""
        model = self.model()
        if model is None:
            return 0.0
        out = model.intercept
        for name, b in zip(model.features, model.values):
            value = x.get(name)
            if value is not None:
                out += b * float(value)
        return float(out) if math.isfinite(out) else 0.0

    def predict_many(self, X):
        """Predictions for a data frame's rows, as a pandas Series."""
        import pandas as pd

        model = self.model()
        if model is None:
            return pd.Series(np.zeros(len(X)), index=X.index)
        out = np.full(len(X), model.intercept)
        cols = {str(c): c for c in X.columns}
        for name, value in zip(model.features, model.values):
            if name in cols:
                out += value * X[cols[name]].to_numpy(dtype=float)
        return pd.Series(out, index=X.index)

    @property
    def stats(self) -> Stats | None:
        """The running statistics (None before the first row)."""
        return self._stats

    @property
    def feature_names(self) -> list[str]:
        """The features seen so far, in the statistics' order."""
        return list(self._names)
