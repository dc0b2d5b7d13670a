"""The River-style learners: learn_many equals looping learn_one to the bit, new names widen the
statistics exactly, and River's own progressive validation of each equals an independent
prequential loop refitted on the rows before each prediction (scikit-learn's Ridge for the
regressor; for the classifier, numpy's class-weighted ridge on River's Phishing data set)."""

import json

import numpy as np
import pandas as pd
import sklearn.linear_model as sk
import pytest
from river import datasets, evaluate, linear_model, metrics, preprocessing, stream

from ravel_lm import Classifier, Learner


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


# --- the classifier -------------------------------------------------------------------------


def class_weighted_ridge(x, t, lam):
    """ravel's classification objective by numpy alone: (1/2) [E_pos (s - 1)^2 + E_neg (s + 1)^2]
    + lam/2 ||b||^2 with s = b0 + x b (each class averaged over its own rows, the intercept
    unpenalized), i.e. weighted least squares with weight 1 / n_class a row."""
    pos = t > 0
    w = np.where(pos, 1.0 / pos.sum(), 1.0 / (~pos).sum())
    a = np.column_stack([np.ones(len(t)), x])
    lhs = a.T @ (w[:, None] * a) + lam * np.diag([0.0] + [1.0] * x.shape[1])
    return np.linalg.solve(lhs, a.T @ (w * t))


def test_classifier_in_progressive_val_score_equals_an_independent_prequential_loop():
    rows = list(datasets.Phishing())
    names = list(rows[0][0])
    x = np.array([[r[0][n] for n in names] for r in rows])
    labels = np.array([r[1] for r in rows])
    lam = 0.01
    # River's own evaluation of the learner, test then train on each row.
    acc = evaluate.progressive_val_score(
        iter(rows), Classifier("ridge", lam=lam, standardize=False), metrics.Accuracy()
    ).get()
    auc = evaluate.progressive_val_score(
        iter(rows), Classifier("ridge", lam=lam, standardize=False), metrics.ROCAUC()
    ).get()
    # The same loop by hand: row i predicted from the rows before it (no prediction before
    # the first row; the one class seen before the second class comes).
    t = np.where(labels, 1.0, -1.0)
    right, scored = 0, 0
    ref_auc = metrics.ROCAUC()
    for i in range(len(t)):
        seen = t[:i]
        if i == 0:
            continue
        if (seen > 0).all() or (seen < 0).all():
            guess = bool(seen[0] > 0)
            proba = {guess: 1.0}
        else:
            b = class_weighted_ridge(x[:i], seen, lam)
            score = b[0] + x[i] @ b[1:]
            guess = bool(score >= 0)
            prob = min(1.0, max(0.0, (1.0 + score) / 2.0))
            proba = {True: prob, False: 1.0 - prob}
        right += guess == labels[i]
        scored += 1
        ref_auc.update(bool(labels[i]), proba)
    assert abs(acc - right / scored) < 1e-12, (acc, right / scored)
    assert abs(auc - ref_auc.get()) < 1e-9, (auc, ref_auc.get())
    # And it learns: River's logistic regression on the same stream (standardized, as
    # River's docs run it) is the yardstick.
    river = evaluate.progressive_val_score(
        iter(rows), preprocessing.StandardScaler() | linear_model.LogisticRegression(),
        metrics.Accuracy(),
    ).get()
    assert acc > 0.85 and acc > river - 0.05, (acc, river)


def test_classifier_learn_many_equals_learn_one_and_its_batch_model():
    rows = list(datasets.Phishing())[:400]
    X = pd.DataFrame([r[0] for r in rows])
    y = pd.Series([r[1] for r in rows])
    one = Classifier("lasso", lam=0.01)
    for (_, row), label in zip(X.iterrows(), y):
        one.learn_one(row.to_dict(), label)
    many = Classifier("lasso", lam=0.01)
    many.learn_many(X.iloc[:123], y.iloc[:123])
    many.learn_many(X.iloc[123:], y.iloc[123:])
    assert one.stats == many.stats and one.stats.task == "classification"
    x0 = X.iloc[7].to_dict()
    assert one.predict_proba_one(x0) == many.predict_proba_one(x0)
    assert list(one.predict_many(X)) == list(many.predict_many(X))
    proba = many.predict_proba_many(X)
    assert np.allclose(proba[True] + proba[False], 1.0)
    assert list(many.predict_many(X)) == list(np.where(proba[True] >= 0.5, True, False))
    # The model of the rows is ravel's class-weighted one (OLS here: numpy's weighted lstsq).
    ols = Classifier("ols", standardize=False)
    ols.learn_many(X, y)
    b = class_weighted_ridge(X.to_numpy(), np.where(y, 1.0, -1.0), 0.0)
    model = ols.model()
    assert np.max(np.abs(model.coef(X.shape[1]) - b[1:])) < 1e-9
    assert abs(model.intercept - b[0]) < 1e-9


def test_classifier_labels_other_than_booleans_and_a_third_class():
    learner = Classifier("ridge", lam=0.1, pos_label="spam")
    assert learner.predict_one({"a": 1.0}) is None
    assert learner.predict_proba_one({"a": 1.0}) == {}
    learner.learn_one({"a": 1.0, "b": 0.0}, "ham")
    assert learner.predict_one({"a": 1.0}) == "ham"
    assert learner.predict_proba_one({"a": 1.0}) == {"ham": 1.0}
    learner.learn_one({"a": 0.0, "b": 1.0}, "spam")
    learner.learn_one({"a": 0.2, "b": 2.0}, "spam")
    assert learner.predict_one({"a": 0.0, "b": 2.0}) == "spam"
    assert set(learner.predict_proba_one({"a": 0.0, "b": 2.0})) == {"spam", "ham"}
    with pytest.raises(ValueError, match="third class"):
        learner.learn_one({"a": 1.0}, "eggs")
    assert learner.stats.n == 3
