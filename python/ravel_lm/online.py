"""A River-style online learner over named features, on ravel's running statistics.

`Learner.learn_one(x, y)` folds one row (a dict of feature name to number) into the running
averages; `predict_one(x)` reads the model of every row so far, extracted when a row has come
since the last prediction. Rows are exact, not approximate, updates: after any rows the model
is the batch model on those rows (OLS, Lasso, ... as ravel's estimators define them). A name
never seen before widens the statistics: the rows before it held it as 0, as River's linear
models take a missing feature. `learn_many(X, y)` folds a data frame's rows one at a time in
the native module, so it equals looping `learn_one` over them to the bit (River's own
`learn_many` is not equivalent: River #996, #1912).

`Classifier` is the classification variant: binary labels (`pos_label`, default True, is the
positive class; the other label seen the negative one), the two classes' statistics kept apart
and weighed at extraction (ravel's class-weighted least squares on +1 / -1 targets, `w_pos`,
`w_neg`), `predict_proba_one` the service's probability clip((1 + s) / 2, 0, 1) of the score
s = b0 + x b and `predict_one` the positive class when s >= 0, as `POST .../predict` labels.

With River installed the learners are River's `MiniBatchRegressor` and `MiniBatchClassifier`,
so they go into River's pipelines and `river.evaluate.progressive_val_score`; without River
they work alone.
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
    _ClassifierBase = _river_base.MiniBatchClassifier
except ImportError:  # pragma: no cover - exercised where River is absent
    _Base = object
    _ClassifierBase = object

_PENALIZED = ("lasso", "elastic-net", "mcp", "scad")
_K_FAMILY = ("olsth", "fsa", "iht", "htp")


class _Online:
    """What both learners share: named features widening the statistics, rows folded one at
    a time, the model extracted when a row came since the last read."""

    _task = "regression"

    def _setup(self, method, k, lam, l1_ratio, gamma, standardize, schedule):
        self.method = method
        self.k = k
        self.lam = lam
        self.l1_ratio = l1_ratio
        self.gamma = gamma
        self.standardize = standardize
        self.schedule = schedule
        self._reset()

    def _reset(self) -> None:
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

    def _target(self, y) -> float:
        return float(y)

    def _saw(self, targets) -> None:
        """After rows with these targets were folded in (the classifier marks its classes)."""

    # --- features ----------------------------------------------------------------
    def _widen(self, names) -> None:
        new = [n for n in names if n not in self._index]
        if not new:
            return
        for name in new:
            self._index[name] = len(self._names)
            self._names.append(name)
        if self._stats is None:
            self._stats = Stats(len(self._names), self._task, self.schedule)
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
    def learn_one(self, x: dict, y) -> None:
        """Folds one row in (new feature names widen the statistics)."""
        target = self._target(y)
        self._widen(list(x))
        if self._stats is None:  # a row without features: nothing to learn from
            return
        self._stats.update_rows(self._row(x)[None, :], np.array([target]))
        self._saw([target])
        self._model = None

    def learn_many(self, X, y) -> None:
        """Folds a data frame's rows in, one at a time: exactly looping `learn_one`."""
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} rows but y has {len(y)} values")
        targets = np.array([self._target(v) for v in y], dtype=float)  # labels checked first
        self._widen([str(c) for c in X.columns])
        if self._stats is None or len(X) == 0:
            return
        cols = [str(c) for c in X.columns]
        rows = np.zeros((len(X), len(self._names)))
        rows[:, [self._index[c] for c in cols]] = X.to_numpy(dtype=float)
        self._stats.update_rows(rows, targets)
        self._saw(targets)
        self._model = None

    def model(self) -> Model | None:
        """The model of every row so far (None before the first row)."""
        if self._stats is None or self._stats.n == 0:
            return None
        if self._model is None:
            doc = self._stats.model(json.dumps(self._request()), list(self._names))
            self._model = Model.from_json(json.loads(doc))
        return self._model

    def _score_one(self, model: Model, x: dict) -> float:
        out = model.intercept
        for name, b in zip(model.features, model.values):
            value = x.get(name)
            if value is not None:
                out += b * float(value)
        return float(out) if math.isfinite(out) else 0.0

    def _score_many(self, model: Model, X) -> np.ndarray:
        out = np.full(len(X), model.intercept)
        cols = {str(c): c for c in X.columns}
        for name, value in zip(model.features, model.values):
            if name in cols:
                out += value * X[cols[name]].to_numpy(dtype=float)
        return out

    @property
    def stats(self) -> Stats | None:
        """The running statistics (None before the first row)."""
        return self._stats

    @property
    def feature_names(self) -> list[str]:
        """The features seen so far, in the statistics' order."""
        return list(self._names)


class Learner(_Online, _Base):
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
        self._setup(method, k, lam, l1_ratio, gamma, standardize, schedule)

    def predict_one(self, x: dict) -> float:
        """b0 + sum of b_j x_j over the known features (0 before the first row)."""
        model = self.model()
        return 0.0 if model is None else self._score_one(model, x)

    def predict_many(self, X):
        """Predictions for a data frame's rows, as a pandas Series."""
        import pandas as pd

        model = self.model()
        if model is None:
            return pd.Series(np.zeros(len(X)), index=X.index)
        return pd.Series(self._score_many(model, X), index=X.index)


class Classifier(_Online, _ClassifierBase):
    """An online binary classifier: ravel's class-weighted least squares on +1 / -1 targets
    (`method` and its `k`, `lam`, ... as `Learner`'s; `w_pos` and `w_neg` weigh the classes,
    1 each by default: the loss is w_pos E_pos[(s - 1)^2] + w_neg E_neg[(s + 1)^2], each class
    averaged over its own rows). `pos_label` is the positive class (River's binary labels are
    True / False); the first other label seen is the negative one, and a third is refused.
    Before both classes are seen there is no model: `predict_proba_one` gives the one class
    seen probability 1 (nothing before the first row), as River's classifiers do."""

    _task = "classification"

    def __init__(
        self,
        method: str = "ols",
        k: int | None = None,
        lam: float | None = None,
        l1_ratio: float | None = None,
        gamma: float | None = None,
        standardize: bool = True,
        schedule: str = "plain",
        pos_label=True,
        w_pos: float | None = None,
        w_neg: float | None = None,
    ):
        self.pos_label = pos_label
        self.w_pos = w_pos
        self.w_neg = w_neg
        self._setup(method, k, lam, l1_ratio, gamma, standardize, schedule)

    def _reset(self) -> None:
        super()._reset()
        self._neg_label = None
        self._seen = {"pos": False, "neg": False}

    @property
    def _multiclass(self) -> bool:
        return False

    def _target(self, y) -> float:
        if y == self.pos_label:
            return 1.0
        if self._neg_label is None:
            self._neg_label = y
        elif y != self._neg_label:
            raise ValueError(
                f"Classifier is binary: label {y!r} is a third class beside pos_label "
                f"{self.pos_label!r} and {self._neg_label!r} (for more, one Classifier per "
                "class, e.g. river.multiclass.OneVsRestClassifier)"
            )
        return -1.0

    def _saw(self, targets) -> None:
        for t in targets:
            self._seen["pos" if t > 0 else "neg"] = True

    def _request(self) -> dict:
        req = super()._request()
        for key, value in (("w_pos", self.w_pos), ("w_neg", self.w_neg)):
            if value is not None:
                req[key] = value
        return req

    def model(self) -> Model | None:
        """The model of every row so far (None until both classes have been seen)."""
        if not (self._seen["pos"] and self._seen["neg"]):
            return None
        return super().model()

    def _only_class(self):
        if self._seen["pos"]:
            return self.pos_label
        return self._neg_label

    def _proba(self, score: float) -> dict:
        prob = min(1.0, max(0.0, (1.0 + score) / 2.0))
        return {self.pos_label: prob, self._neg_label: 1.0 - prob}

    def decision_one(self, x: dict) -> float | None:
        """The score s = b0 + x b (positive for `pos_label`); None without a model."""
        model = self.model()
        return None if model is None else self._score_one(model, x)

    def predict_proba_one(self, x: dict) -> dict:
        """{pos_label: clip((1 + s) / 2, 0, 1), the other label: the rest}; {} before the
        first row, {the one class seen: 1} before the second class."""
        score = self.decision_one(x)
        if score is None:
            only = self._only_class()
            return {} if self._stats is None or self._stats.n == 0 else {only: 1.0}
        return self._proba(score)

    def predict_one(self, x: dict):
        """`pos_label` when s >= 0, else the other label (None before the first row)."""
        score = self.decision_one(x)
        if score is None:
            return None if self._stats is None or self._stats.n == 0 else self._only_class()
        return self.pos_label if score >= 0 else self._neg_label

    def predict_proba_many(self, X):
        """The probabilities of a data frame's rows (a pandas DataFrame, a column a class)."""
        import pandas as pd

        model = self.model()
        if model is None:
            only = self._only_class() if self._stats is not None and self._stats.n else None
            cols = [] if only is None else [only]
            return pd.DataFrame({c: np.ones(len(X)) for c in cols}, index=X.index)
        prob = np.clip((1.0 + self._score_many(model, X)) / 2.0, 0.0, 1.0)
        return pd.DataFrame({self.pos_label: prob, self._neg_label: 1.0 - prob}, index=X.index)

    def predict_many(self, X):
        """The labels of a data frame's rows, as a pandas Series."""
        import pandas as pd

        model = self.model()
        if model is None:
            only = self._only_class() if self._stats is not None and self._stats.n else None
            return pd.Series([only] * len(X), index=X.index, dtype=object)
        score = self._score_many(model, X)
        labels = np.where(score >= 0, 1, 0)
        return pd.Series(
            [self.pos_label if v else self._neg_label for v in labels], index=X.index,
            dtype=object,
        )
