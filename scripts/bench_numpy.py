"""numpy's X.T @ X on the same mini-batches as `cargo bench --bench stats` (rows/s).

The reference for ravel's ingest target: `RunningStats::update_batch` should fold at least as
many rows per second as numpy (OpenBLAS) computes X.T @ X for the same batch shapes.
Run: python3 -m pip install numpy && python3 scripts/bench_numpy.py
"""
import time

import numpy as np

print(f"numpy {np.__version__}")
try:
    np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    print("BLAS:", np.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"])
except Exception:  # older numpy
    pass
rng = np.random.default_rng(1)
print(f"{'benchmark':<44} {'result':>14} {'unit':>10}")
for p, batch in [(100, 1024), (1000, 256), (1000, 1024), (1000, 4096)]:
    x = rng.standard_normal((batch, p))
    reps = int(min(max(2e10 / (p * p * batch), 3), 2000))
    x.T @ x
    times = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(reps):
            x.T @ x
        times.append((time.perf_counter() - t) / reps)
    rate = batch / sorted(times)[len(times) // 2]
    print(f"{f'numpy X.T @ X p={p} B={batch}':<44} {rate:>14.0f} {'rows/s':>10}")
