#!/usr/bin/env python3
"""Stand-ins for paper 004's wide data sets (its Table 1), which cannot be downloaded here.

  pyrim      74 x 201,376: every monomial of degree <= 5 of a 27-column base design
             (C(32, 5) = 201,376 columns, the constant included, as 004's "product features of
             order 5"); dense, written as NPY (features, then the target as the last column).
  triazines  186 x 635,376: degree <= 4 of a 60-column base design (C(64, 4) = 635,376), NPY.
  tfidf      E2006-tfidf-like sparse text: 16,087 training and 3,308 test rows, 150,360
             columns, about 1,240 nonzeros a row (density 0.83 %), LIBSVM.
  log1p      E2006-log1p-like: the same rows, 4,272,227 columns, about 6,000 nonzeros a row
             (density 0.14 %), LIBSVM.
  sparse200k issue 59's "first day" file: tfidf-like text with 200,000 heavy-tailed columns,
             2,000 training and 500 test rows (unless --rows / --test-rows), about 150
             nonzeros a row, LIBSVM (docs/benchmarks.md, "ravel fit --wide with its defaults").

Base designs are discrete (steps of 0.1 in [0.1, 0.9], as the QSAR descriptors of Pyrim and
Triazines), so many products repeat. Text columns have heavy-tailed document frequencies (a
Zipf law with exponent 1.1 over a random order of the columns: a few columns in most rows, most
in a handful); row lengths are log-normal; tfidf values are log term frequencies times the
column's idf, each row scaled to unit norm; log1p values are log(1 + count). y = x^T w + e with
w nonzero on 40 columns drawn among those in at least 1 % of the rows (pyrim, triazines: 10
monomials of degree >= 2), the noise giving R^2 about 0.6 (text) or 0.8 (products).

The densities are the published sets' as this script's author remembers them (the LIBSVM data
page: E2006-tfidf about 20 M nonzeros in training, E2006-log1p about 97 M); they were not
checked against the files, which are not reachable from here.

Run: python3 scripts/make_wide.py SET [SET...] --out DIR [--seed S] [--rows N]
(numpy only; pyrim about 5 s, tfidf about a minute, log1p several minutes and 1.6 GB of text).
Files: DIR/pyrim.npy, DIR/triazines.npy, DIR/tfidf.train.svm + tfidf.test.svm,
DIR/log1p.train.svm + log1p.test.svm, DIR/sparse200k.train.svm + sparse200k.test.svm.
"""
import argparse
import math
import pathlib
import sys
import time

import numpy as np


def monomials(base, degree):
    """Every monomial of degree 0..degree of the columns of base (n x m), as n x C(m+d, d)."""
    n, m = base.shape
    cols = [np.ones((n, 1))]
    # prev: the monomials of the previous degree, with the last variable of each.
    prev, last = np.ones((n, 1)), np.array([0])
    for _ in range(degree):
        blocks, lasts = [], []
        for v in range(m):
            keep = last <= v
            blocks.append(prev[:, keep] * base[:, [v]])
            lasts.append(np.full(int(keep.sum()), v))
        prev, last = np.hstack(blocks), np.concatenate(lasts)
        cols.append(prev)
    return np.hstack(cols)


def products(name, rows, m, degree, out, rng):
    base = rng.integers(1, 10, size=(rows, m)) / 10.0
    x = monomials(base, degree)
    assert x.shape[1] == math.comb(m + degree, degree), x.shape
    # True model: 10 monomials of degree >= 2 (columns after the constant and the m linear ones).
    true = rng.choice(np.arange(1 + m, x.shape[1]), size=10, replace=False)
    signal = x[:, true] @ rng.normal(0, 1, size=10)
    signal = (signal - signal.mean()) / (signal.std() + 1e-12)
    y = 0.5 + 0.1 * signal + 0.05 * rng.normal(size=rows)
    a = np.empty((rows, x.shape[1] + 1))
    a[:, :-1] = x
    a[:, -1] = y
    np.save(out / f"{name}.npy", a)
    return a.shape


def text(name, p, per_row, log_values, out, rng, rows_train, rows_test):
    rows = rows_train + rows_test
    order = rng.permutation(p)
    w = 1.0 / (np.arange(p) + 10.0) ** 1.1
    cdf = np.cumsum(w)
    cdf /= cdf[-1]
    idf = np.log(1.0 + p / (w / w.max() * p))  # rarer columns weigh more
    lengths = np.maximum(1, rng.lognormal(np.log(per_row) - 0.18, 0.6, size=rows)).astype(int)
    lengths = np.minimum(lengths, p)
    true_rank = rng.choice(np.arange(20, 2000), size=40, replace=False)
    true_col = order[true_rank]
    true_w = rng.normal(0, 1, size=40)
    signal = np.zeros(rows)
    lines = []
    for i in range(rows):
        # Sample with replacement and keep the distinct columns (a few fewer than drawn).
        ranks = np.unique(np.searchsorted(cdf, rng.random(int(lengths[i] * 1.7))))
        ranks = ranks[ranks < p]
        counts = 1 + rng.geometric(0.5, size=ranks.size) - 1
        if log_values:
            vals = np.log1p(counts.astype(float))
        else:
            vals = np.log1p(counts.astype(float)) * idf[ranks]
            vals /= np.sqrt(vals @ vals)
        cols = order[ranks]
        # Signal before sorting: the true columns present in this row.
        hit = np.isin(true_rank, ranks)
        if hit.any():
            pos = np.searchsorted(ranks, true_rank[hit])
            signal[i] = vals[pos] @ true_w[hit]
        s = np.argsort(cols)
        cols, vals = cols[s] + 1, np.round(vals[s], 6)
        lines.append((cols.astype(np.int32), vals))
    signal = (signal - signal.mean()) / (signal.std() + 1e-12)
    y = -3.5 + 0.45 * signal + 0.35 * rng.normal(size=rows)
    nnz = 0
    for part, lo, hi in (("train", 0, rows_train), ("test", rows_train, rows)):
        with open(out / f"{name}.{part}.svm", "w") as f:
            for i in range(lo, hi):
                cols, vals = lines[i]
                nnz += len(cols) if part == "train" else 0
                pairs = map("{}:{:g}".format, cols.tolist(), vals.tolist())
                f.write(f"{y[i]:.6f} " + " ".join(pairs) + "\n")
    return (rows_train, p, nnz)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sets", nargs="+", choices=["pyrim", "triazines", "tfidf", "log1p", "sparse200k"])
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--rows", type=int, default=None,
                    help="training rows of the text sets (16,087; sparse200k 2,000)")
    ap.add_argument("--test-rows", type=int, default=None, help="(3,308; sparse200k 500)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    for s in a.sets:
        rng = np.random.default_rng(a.seed)
        t = time.time()
        if s == "pyrim":
            shape = products("pyrim", 74, 27, 5, a.out, rng)
        elif s == "triazines":
            shape = products("triazines", 186, 60, 4, a.out, rng)
        elif s == "sparse200k":
            # 108 draws a row keep about 150 distinct columns.
            shape = text("sparse200k", 200_000, 108, False, a.out, rng, a.rows or 2_000,
                         a.test_rows or 500)
        else:
            rows, test_rows = a.rows or 16_087, a.test_rows or 3_308
            if s == "tfidf":
                shape = text("tfidf", 150_360, 1_241, False, a.out, rng, rows, test_rows)
            else:
                shape = text("log1p", 4_272_227, 6_013, True, a.out, rng, rows, test_rows)
        print(f"{s}: {shape} in {time.time() - t:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
