#!/usr/bin/env python3
"""The cost of cross-validation folds on ingest (issue 17 item 2): `ravel serve` (release
build, whole process) reading the same binary topic on `ravel broker` into a stream without
folds (K = 0) and with `cv.folds = K` (default 5), in interleaved rounds (K = 0, K = 5, K = 0,
...), one Markdown table. The helpers are bench_all.py's (section 2): the topic is filled
beforehand (128 partitions), each run starts from the beginning with a fresh state directory,
and the rates are rows over the whole process (start to every row visible over HTTP) and, in
brackets, from the first row to the last; CPU seconds of the process by then.

Run: pip install numpy confluent-kafka
     cargo build --release
     python3 scripts/bench_folds.py [--rounds 3] [--p 100] [--folds 5] [--messages 5000]
"""

import argparse
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_all import fill, fmt_s, log, messages, serve_once  # noqa: E402
from bench_freshness import Procs, start_broker  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ravel", default=os.path.join(ROOT, "target", "release", "ravel"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--p", type=int, default=100)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--messages", type=int, default=5000)
    ap.add_argument("--rows-per-message", type=int, default=100)
    args = ap.parse_args()
    p, per, count = args.p, args.rows_per_message, args.messages
    total = per * count
    results = {0: ([], [], []), args.folds: ([], [], [])}
    with tempfile.TemporaryDirectory() as workdir:
        procs = Procs()
        with open(os.path.join(workdir, "folds.log"), "a") as logf:
            try:
                _, bootstrap = start_broker(procs, args.ravel, ["bench.tput:128", "bench.tput.dlq:1"], logf)
                msgs = messages(p, per, "binary")
                log(f"filling {count} binary messages of {per} rows, p = {p}")
                fill(bootstrap, "bench.tput", 128, msgs, count)
                for r in range(args.rounds):
                    for k in (0, args.folds):
                        log(f"round {r + 1}: K = {k}")
                        s, rate, cpu = serve_once(args.ravel, bootstrap, p, total, workdir, logf, f"g{r}k{k}", folds=k, deadline_s=900)
                        for acc, v in zip(results[k], (s, rate, cpu)):
                            acc.append(v)
            finally:
                procs.stop_all()
    print(f"| ravel serve, binary topic, p = {p}, {total // 1000}k rows, {per} rows/message | "
          "whole process | rows/s (whole) | rows/s (first to last row) | CPU s |")
    print("|---|---|---|---|---|")
    for k, (s, rate, cpu) in results.items():
        print(f"| cv.folds = {k if k else 'none (K = 0)'} | {fmt_s(s)} | {total / statistics.median(s):,.0f} | "
              f"{statistics.median(rate):,.0f} | {statistics.median(cpu):.2f} |")
    (s0, r0, c0), (s5, r5, c5) = results[0], results[args.folds]
    print(f"\nK = {args.folds} / K = 0: whole-process time x{statistics.median(s5) / statistics.median(s0):.2f}, "
          f"first-to-last rate x{statistics.median(r5) / statistics.median(r0):.2f}, "
          f"CPU x{statistics.median(c5) / statistics.median(c0):.2f} (medians of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
