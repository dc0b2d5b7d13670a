"""Typed models: what an extraction returns, in the estimators and from the service alike.

The service's model document (`POST /v1/streams/{name}/model`, `ravel fit`) and the native
module's answer are the same JSON; `Model` and `Path` give it Python types: the coefficients
as a pandas Series indexed by feature (a dict without pandas), the dense vector on demand, and
`summary()` for a notebook.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _series(pairs: list[tuple[str, float]]):
    try:
        import pandas as pd
    except ImportError:  # pandas is optional for the estimators
        return dict(pairs)
    return pd.Series(
        [v for _, v in pairs], index=[k for k, _ in pairs], dtype=float, name="coefficient"
    )


@dataclass
class Model:
    """One extracted model: method, intercept, the nonzero coefficients and how it was got."""

    method: str
    k: int
    lam: float | None
    intercept: float
    n: int
    indices: np.ndarray
    values: np.ndarray
    features: list[str]
    diagnostics: dict[str, Any]
    selection: dict[str, Any] | None = None
    inference: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Model":
        coefs = doc.get("coefficients", [])
        return cls(
            method=doc["method"],
            k=int(doc["k"]),
            lam=doc.get("lambda"),
            intercept=float(doc["intercept"]),
            n=int(doc["n"]),
            indices=np.array([c["index"] for c in coefs], dtype=np.intp),
            values=np.array([c["value"] for c in coefs], dtype=float),
            features=[c["feature"] for c in coefs],
            diagnostics=doc.get("diagnostics", {}),
            selection=doc.get("selection"),
            inference=doc.get("inference"),
            raw=doc,
        )

    @property
    def coefficients(self):
        """The nonzero coefficients by feature name (a pandas Series; a dict without pandas)."""
        return _series(list(zip(self.features, self.values.tolist())))

    def coef(self, p: int) -> np.ndarray:
        """The dense coefficient vector of length p (zeros off the support)."""
        b = np.zeros(p)
        b[self.indices] = self.values
        return b

    def summary(self) -> str:
        """A few lines for a notebook: method, fit, and the coefficients largest first."""
        d = self.diagnostics
        lines = [
            f"{self.method}: {self.k} nonzero coefficients of n = {self.n} rows"
            + (f", lambda = {self.lam:.6g}" if self.lam is not None else ""),
            f"  intercept {self.intercept:.6g}; train MSE {d.get('train_mse', float('nan')):.6g},"
            f" R^2 {d.get('r2', float('nan')):.4f}",
        ]
        order = np.argsort(-np.abs(self.values))
        for i in order:
            lines.append(f"  {self.features[i]:<24} {self.values[i]: .6g}")
        for note in d.get("notes", []):
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


@dataclass
class Path:
    """A whole path of models, sparsest first, with the selection of a `select` request."""

    method: str
    n: int
    points: list[Model]
    selection: dict[str, Any] | None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Path":
        return cls(
            method=doc["method"],
            n=int(doc["n"]),
            points=[Model.from_json(m) for m in doc["points"]],
            selection=doc.get("selection"),
            raw=doc,
        )

    @property
    def lambdas(self) -> np.ndarray:
        """Each point's lambda (NaN where the method has none)."""
        return np.array([np.nan if m.lam is None else m.lam for m in self.points])

    def coefs(self, p: int) -> np.ndarray:
        """The dense coefficients, one row per point (len(points) x p)."""
        return np.array([m.coef(p) for m in self.points]).reshape(len(self.points), p)

    def __len__(self) -> int:
        return len(self.points)
