"""ravel from Python: sparse linear models from running-average statistics.

- `ravel_lm.Stats`: the statistics themselves (the native module, ravel-core over PyO3):
  fold numpy rows, merge shards, serialize, extract any model or path; `ravel_lm.FoldStats`,
  K folds of them, for exact K-fold cross-validation (`select="cv"`).
- scikit-learn estimators with an exact `partial_fit` (`ravel_lm.estimators`): `OLS`,
  `Ridge`, `Lasso`, `ElasticNet`, `MCP`, `SCAD`, `OLSth`, `FSA`, `IHT`, `HTP`,
  `LinearClassifier`.
- River-style learners over named features (`ravel_lm.online.Learner`, a regressor, and
  `ravel_lm.online.Classifier`): `learn_one`, `predict_one`, `learn_many`.
- A client for the service (`ravel_lm.Client`): streams, models, paths, predictions,
  declarations, quality, history, and a stream's statistics into an estimator.

docs/python.md in the repository is the guide.
"""

from ._model import Model, Path
from ._native import FoldStats, Stats, __version__

__all__ = ["Stats", "FoldStats", "Model", "Path", "__version__"]


_ESTIMATORS = {
    "OLS", "Ridge", "Lasso", "ElasticNet", "MCP", "SCAD", "OLSth", "FSA", "IHT", "HTP",
    "LinearClassifier",
}


def __getattr__(name):
    # Each is imported when first named: `import ravel_lm` and the estimators on numpy
    # arrays need numpy alone (the client needs pandas, the learners River's pipelines).
    if name in _ESTIMATORS:
        from . import estimators

        return getattr(estimators, name)
    if name in ("Learner", "Classifier"):
        from . import online

        return getattr(online, name)
    if name in ("Client", "ApiError"):
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'ravel_lm' has no attribute {name!r}")
