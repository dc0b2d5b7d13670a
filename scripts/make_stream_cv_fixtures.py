"""Independent reference for `tests/stream_cv.rs` (issue 17 item 2): exact K-fold
cross-validation of a stream with `cv.folds = 5`, by scikit-learn on the same rows and the
same fold assignment.

Regenerate (from the repository root; numpy and scikit-learn installed):

    python3 scripts/make_stream_cv_fixtures.py

Writes tests/fixtures/stream_cv/{rows.csv, expected.json}.

The stream: N rows of P features sent as binary messages of R rows, message m (0-based) to
partition m % 3 of topic "t.cv" (3 partitions), so its offset is m // 3 (the test produces
them in that order into a fresh topic). A row's fold is the service's documented hash
(src/ingest/cv.rs), reimplemented here: FNV-1a 64 of topic bytes, a zero byte, the partition
(i32 big-endian), the offset (i64 big-endian) and the row's index in its message (u32
big-endian), then splitmix64 of that, mod K.

The CV itself is `make_selection_fixtures.py`'s `lasso_cv` (same lambda grid, StandardScaler on the
training rows, sklearn's Lasso, cv.glmnet's mean and standard error weighted by fold sizes,
the minimum and the one-standard-error rule).
"""
import json
import os
import struct

import numpy as np
import sklearn

from make_selection_fixtures import lasso_cv, splitmix64

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "stream_cv")
M64 = (1 << 64) - 1
TOPIC, PARTITIONS, N, P, R, K = "t.cv", 3, 1200, 10, 20, 5
POINTS, RATIO = 30, 1e-3


def fnv1a64(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def fold_of(topic, partition, offset, row):
    key = topic.encode() + b"\0" + struct.pack(">i", partition) + struct.pack(">q", offset)
    return splitmix64(fnv1a64(key + struct.pack(">I", row))) % K


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(23)
    x = rng.normal(size=(N, P)) * rng.uniform(0.5, 3.0, size=P) + rng.normal(size=P) * 5
    beta = np.zeros(P)
    beta[:4] = [1.5, -1.0, 0.6, 0.3]
    y = 2.0 + x @ beta + rng.normal(size=N) * 2.0
    with open(os.path.join(OUT, "rows.csv"), "w") as f:
        f.write(",".join([f"f{j}" for j in range(P)] + ["y"]) + "\n")
        for row, v in zip(x, y):
            f.write(",".join(repr(float(a)) for a in row) + "," + repr(float(v)) + "\n")
    # Read back what the test sends (the text's numbers).
    data = np.loadtxt(os.path.join(OUT, "rows.csv"), delimiter=",", skiprows=1)
    x, y = data[:, :P], data[:, P]
    fold = np.array(
        [fold_of(TOPIC, (i // R) % PARTITIONS, (i // R) // PARTITIONS, i % R) for i in range(N)]
    )
    cv = lasso_cv(x, y, fold, K, POINTS, RATIO)
    expected = {
        "generator": f"scripts/make_stream_cv_fixtures.py (numpy {np.__version__}, scikit-learn {sklearn.__version__})",
        "topic": TOPIC,
        "partitions": PARTITIONS,
        "rows_per_message": R,
        "folds": K,
        "path_points": POINTS,
        "lambda_min_ratio": RATIO,
        "fold_of_row": fold.tolist(),
        **cv,
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(f"fold sizes {cv['fold_sizes']}, chosen min {cv['chosen_min']}, 1se {cv['chosen_1se']}")


if __name__ == "__main__":
    main()
