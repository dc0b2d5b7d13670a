"""Writes tests/fixtures/housing.csv and tests/fixtures/housing_expected.json: a housing-like
table with named columns in a shuffled order, a categorical column (4 declared levels plus
values never declared), a column of tokens to hash, and 5% missing cells, with the OLS model
scikit-learn fits on the same rows after the same mapping ravel documents
(crates/ravel-core/src/fields.rs):

- numeric columns: SimpleImputer(strategy="constant", fill_value=0, add_indicator=True)
  (ravel: missing = "indicator": value 0 plus a 0/1 column <name>=missing);
- region: undeclared values -> "other", missing -> "missing", then OneHotEncoder over
  [declared levels..., "other", "missing"] with drop="first" (ravel: the first declared level is
  the reference; <name>=other; <name>=missing);
- tags: FeatureHasher(n_features=8, input_type="string") (ravel: kind = "hashed", buckets = 8,
  MurmurHash3 with a sign, as FeatureHasher).

tests/fields.rs runs `ravel fit` on the CSV and streams the same rows through the service, and
compares with these coefficients by name.

    python3 -m venv .venv && .venv/bin/pip install numpy pandas scikit-learn
    .venv/bin/python scripts/make_fields_fixtures.py
"""

import json
import os

import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction import FeatureHasher
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures")

LEVELS = ["north", "south", "east", "west"]
BUCKETS = 8
rng = np.random.default_rng(31)
n = 600

sqft = rng.uniform(500, 3000, n).round(1)
age = rng.integers(1, 80, n).astype(float)
rooms = rng.integers(1, 7, n).astype(float)
region = rng.choice(LEVELS + ["central", "lake"], n, p=[0.25, 0.2, 0.2, 0.2, 0.1, 0.05])
tags = rng.choice([f"t{i}" for i in range(20)], n)
effect = {"north": 0.0, "south": 30.0, "east": -20.0, "west": 10.0, "central": 50.0, "lake": 80.0}
price = (
    50
    + 0.15 * sqft
    - 0.9 * age
    + 12 * rooms
    + np.array([effect[r] for r in region])
    + rng.normal(0, 10, n)
).round(3)

df = pd.DataFrame(
    {"sqft": sqft, "age": age, "rooms": rooms, "region": region.astype(object), "tags": tags}
)
# 5% missing cells in the numeric columns and in region (never in tags or price).
for col in ["sqft", "age", "rooms", "region"]:
    df.loc[rng.random(n) < 0.05, col] = None
df["price"] = price

# The file: columns shuffled, the target in the middle; missing cells written as "" or "NA".
order = ["region", "age", "price", "tags", "sqft", "rooms"]
with open(os.path.join(OUT, "housing.csv"), "w") as f:
    f.write(",".join(order) + "\n")
    for i in range(n):
        cells = []
        for c in order:
            v = df.at[i, c]
            if v is None or (isinstance(v, float) and np.isnan(v)):
                cells.append("NA" if i % 2 else "")
            elif c in ("region", "tags"):
                cells.append(str(v))
            else:
                cells.append(repr(float(v)))
        f.write(",".join(cells) + "\n")

numeric = ["sqft", "age", "rooms"]
for c in numeric:
    assert df[c].isna().any(), c


def region_values(frame):
    r = frame["region"].astype(object)
    r = r.where(r.isna() | r.isin(LEVELS), "other")
    return r.fillna("missing").to_frame()


def tokens(frame):
    return [[t] for t in frame["tags"]]


ct = ColumnTransformer(
    [
        ("num", SimpleImputer(strategy="constant", fill_value=0, add_indicator=True), numeric),
        (
            "region",
            Pipeline(
                [
                    ("levels", FunctionTransformer(region_values, validate=False)),
                    (
                        "onehot",
                        OneHotEncoder(
                            categories=[LEVELS + ["other", "missing"]],
                            drop="first",
                            sparse_output=False,
                        ),
                    ),
                ]
            ),
            ["region"],
        ),
        (
            "tags",
            Pipeline(
                [
                    ("tokens", FunctionTransformer(tokens, validate=False)),
                    ("hash", FeatureHasher(n_features=BUCKETS, input_type="string")),
                ]
            ),
            ["tags"],
        ),
    ],
    sparse_threshold=0,
)
X = ct.fit_transform(df)
names = (
    numeric
    + [f"{c}=missing" for c in numeric]
    + [f"region={lv}" for lv in LEVELS[1:] + ["other", "missing"]]
    + [f"tags#{b}" for b in range(BUCKETS)]
)
assert X.shape[1] == len(names)
ols = LinearRegression().fit(X, df["price"].to_numpy())
expected = {
    "reference": f"scikit-learn {__import__('sklearn').__version__}: a ColumnTransformer of "
    "SimpleImputer(fill_value=0, add_indicator=True), OneHotEncoder(drop='first') over the "
    "declared levels + other + missing, FeatureHasher(8, input_type='string'); LinearRegression",
    "n": int(n),
    "intercept": float(ols.intercept_),
    "coefficients": {nm: float(c) for nm, c in zip(names, ols.coef_)},
}
with open(os.path.join(OUT, "housing_expected.json"), "w") as f:
    json.dump(expected, f, indent=1, sort_keys=True)
    f.write("\n")
print(json.dumps(expected, indent=1)[:800])
