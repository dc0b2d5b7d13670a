"""The River-style learner: learn_many equals looping learn_one to the bit, new names widen the
statistics exactly, and River's own progressive validation of it equals an independent
prequential loop with scikit-learn's Ridge refitted on the rows before each prediction."""

import json

import numpy as np
import pandas as pd
import sklearn.linear_model as sk
from river import evaluate, linear_model, metrics, preprocessing, stream

from ravel_lm import Learner


def frame(n=300, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)) * [1.0, 3.0, 0.5, 2.0] + [0.0, 10.0, -5.0, 1.0]
    y = 1.0 + x @ [1.5, -0.5, 0.0, 2.0] + 0.3 * rng.standard_normal(n)
    return pd.DataFrame(x, columns=["a", "b", "c", "d"]), pd.Series(y)


def test_learn_many_equals_looping_learn_one_exactly():
    X, y = frame()
    # Names arrive over time: c and d only from row 100 on, so the statistics widen mid-stream.
    early, late = X.iloc[:100][["a", "b"]], X.iloc[100:]
    one = Learner("lasso", lam=0.01)
    for frame_part, ys in ((early, y.iloc[:100]), (late, y.iloc[100:])):
        for (_, row), target in zip(frame_part.iterrows(), ys):
            one.learn_one(row.to_dict(), target)
    many = Learner("lasso", lam=0.01)
    many.learn_many(early, y.iloc[:100])
    many.learn_many(late.iloc[:77], y.iloc[100:177])
    many.learn_many(late.iloc[77:], y.iloc[177:])
    assert one.feature_names == many.feature_names == ["a", "b", "c", "d"]
    assert json.loads(one.stats.to_json()) == json.loads(many.stats.to_json())
    assert one.stats == many.stats
    x = X.iloc[5].to_dict()
    assert one.predict_one(x) == many.predict_one(x)
    assert np.array_equal(one.predict_many(X).to_numpy(), many.predict_many(X).to_numpy())


def test_widened_statistics_are_those_of_the_rows_with_zeros():
    X, y = frame()
    learner = Learner("ols", standardize=False)
    for i, ((_, row), target) in enumerate(zip(X.iterrows(), y)):
        x = row.to_dict()
        if i < 120:
            del x["d"]  # not seen yet: the rows before it hold it as 0
        learner.learn_one(x, target)
    padded = X.copy()
    padded.loc[: 119, "d"] = 0.0
    ref = sk.LinearRegression().fit(padded[learner.feature_names], y)
    model = learner.model()
    coef = model.coef(4)
    assert np.max(np.abs(coef - ref.coef_)) < 1e-9
    assert abs(model.intercept - ref.intercept_) < 1e-9


def test_progressive_val_score_equals_an_independent_prequential_loop():
    X, y = frame(n=150)
    lam = 0.05
    learner = Learner("ridge", lam=lam, standardize=False)
    got = evaluate.progressive_val_score(
        stream.iter_frame(X, y), learner, metrics.MAE()
    ).get()
    # The same test-then-train loop with scikit-learn's Ridge refitted on rows 0..t-1 before
    # row t (ravel's ridge: (1/2t)||.||^2 + lam/2 ||b||^2, so alpha = t lam); 0 before any row.
    x, t = X.to_numpy(), y.to_numpy()
    errors = [abs(t[0])]
    for i in range(1, len(t)):
        ref = sk.Ridge(alpha=i * lam, solver="cholesky").fit(x[:i], t[:i])
        errors.append(abs(ref.predict(x[i : i + 1])[0] - t[i]))
    assert abs(got - np.mean(errors)) < 1e-9, (got, np.mean(errors))


def test_in_a_river_pipeline():
    X, y = frame()
    # River's scaler is online (each row scaled by the mean and variance so far), so the
    # learner sees other numbers than the raw rows: the pipeline runs, and predicts well.
    piped = evaluate.progressive_val_score(
        stream.iter_frame(X, y), preprocessing.StandardScaler() | Learner("ols"), metrics.R2()
    ).get()
    alone = evaluate.progressive_val_score(
        stream.iter_frame(X, y), Learner("ols"), metrics.R2()
    ).get()
    river = evaluate.progressive_val_score(
        stream.iter_frame(X, y),
        preprocessing.StandardScaler() | linear_model.LinearRegression(),
        metrics.R2(),
    ).get()
    # The exact least-squares fit of the rows so far beats River's SGD on the same stream.
    assert piped > 0.8 and alone > river, (piped, alone, river)
