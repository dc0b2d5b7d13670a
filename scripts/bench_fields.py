#!/usr/bin/env python3
"""Ingest by name against ingest by position, as whole processes (issue 31): the release
`ravel serve` reading p = 100 rows from a real broker (`ravel broker`) as

- JSON mini-batches of 100 rows by position, `{"rows": [...], "y": [...]}`;
- JSON named mini-batches of 100 rows, `{"columns": [names], "rows": ..., "y": ...}`, the names
  in another order than the stream declares them;
- JSON rows by position, one a message, `{"x": [...], "y": v}`;
- nested JSON events, one a message, `{"id": ..., "a": {"f0": ...}, "b": {...}, "price": v}`,
  on a stream that declares `target = "price"` and the features as dotted paths;
- events as applications write them (issue 62), one a message: the features two levels deep
  (`{"sale": {"store": {"f0": ...}, "basket": {...}}}`), beside them ten keys the stream does
  not use (an id string, a timestamp, a nested object holding a list, numbers), on a stream
  that declares `target = "price"`.

With `--decimals 6` every number is written with 6 decimals (as most applications write
prices and measurements) in every case, so that the cases read the same rows; the issue's
design is `--p 20 --decimals 6 --cases "positional rows,application events"`.

Each round starts a fresh service (a new consumer group, an empty state directory) on the
filled topic and waits until every row is in the statistics; rounds go case after case, in
turns. Reported: rows/s from the first row seen to the last, and the service process's CPU
seconds per million rows (its own cost: the broker and this script run beside it on the same
cores). The medians over the rounds.

    cargo build --release && python3 scripts/bench_fields.py [--rounds 3] [--rows 200000]
        [--p 100] [--decimals D] [--cases "positional rows,nested events"]

Needs numpy and confluent-kafka (`pip install numpy confluent-kafka`).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_all import fill, rows_seen  # noqa: E402
from bench_freshness import Procs, cpu_seconds, start_broker, start_serve  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
P = 100
PARTITIONS = 64
NAMES = [f"f{j}" for j in range(P)]
NESTED = [f"{'a' if j < P // 2 else 'b'}.f{j}" for j in range(P)]
APPLICATION = [f"sale.{'store' if j < P // 2 else 'basket'}.f{j}" for j in range(P)]


def data(n, seed=3, decimals=None):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, P))
    y = x[:, :min(10, P)] @ np.arange(1, min(10, P) + 1) + rng.standard_normal(n)
    if decimals is not None:
        x, y = np.round(x, decimals), np.round(y, decimals)
    return x, y


def application_event(i, row, y):
    """One event as an application writes it: the mapped fields two levels deep, and ten keys
    the stream does not use (strings, a timestamp, a nested object with a list, numbers)."""
    half = P // 2
    return {
        "id": f"sale-{i:09d}",
        "ts": 1764633600000 + i,
        "channel": "web" if i % 3 else "store",
        "sale": {
            "store": {f"f{j}": row[j] for j in range(half)},
            "basket": {f"f{j}": row[j] for j in range(half, P)},
        },
        "meta": {"source": "pos-17", "tags": ["promo", "weekday"], "dims": {"w": 1.25, "h": 0.5}},
        "discount": round(0.05 * (i % 7), 6),
        "tax": 0.2,
        "items": i % 5 + 1,
        "currency": "EUR",
        "paid": i % 11 != 0,
        "score": round(row[0] * 0.5, 6),
        "price": y,
    }


def messages(case, x, y):
    if case == "positional batches":
        return [json.dumps({"rows": x[i:i + 100].tolist(), "y": y[i:i + 100].tolist()}).encode()
                for i in range(0, len(y), 100)]
    if case == "named batches":
        order = NAMES[::-1]
        return [json.dumps({"columns": order, "rows": x[i:i + 100, ::-1].tolist(),
                            "y": y[i:i + 100].tolist()}).encode()
                for i in range(0, len(y), 100)]
    if case == "positional rows":
        return [json.dumps({"x": x[i].tolist(), "y": float(y[i])}).encode() for i in range(len(y))]
    if case == "nested events":
        out = []
        for i in range(len(y)):
            row = x[i].tolist()
            out.append(json.dumps({
                "id": f"sale-{i}",
                "a": {f"f{j}": row[j] for j in range(P // 2)},
                "b": {f"f{j}": row[j] for j in range(P // 2, P)},
                "price": float(y[i]),
            }).encode())
        return out
    if case == "application events":
        return [json.dumps(application_event(i, x[i].tolist(), float(y[i]))).encode()
                for i in range(len(y))]
    raise ValueError(case)


CASES = ["positional batches", "named batches", "positional rows", "nested events",
         "application events"]


def stream_toml(case, topic):
    if case in ("nested events", "application events"):
        feats = ", ".join(f'"{n}"' for n in (NESTED if case == "nested events" else APPLICATION))
        return f'[[streams]]\nname = "tput"\ntopic = "{topic}"\ntarget = "price"\nfeatures = [{feats}]\n'
    feats = ", ".join(f'"{n}"' for n in NAMES)
    return f'[[streams]]\nname = "tput"\ntopic = "{topic}"\nfeatures = [{feats}]\n'


def serve_once(ravel, bootstrap, case, topic, total, workdir, logf, group):
    cfg = os.path.join(workdir, f"{group}.toml")
    with open(cfg, "w") as f:
        f.write(f'[http]\naddr = "127.0.0.1:0"\n\n[kafka]\nbrokers = "{bootstrap}"\ngroup_id = "{group}"\n')
        f.write('[kafka.options]\n"session.timeout.ms" = "6000"\n\n')
        f.write(f'[state]\ndir = "{tempfile.mkdtemp(dir=workdir)}"\n\n[demo]\nenabled = false\n\n')
        f.write(stream_toml(case, topic))
    procs = Procs()
    try:
        proc, api = start_serve(procs, ravel, cfg, logf)
        first, deadline = None, time.perf_counter() + 600
        while True:
            n, now = rows_seen(api, "tput"), time.perf_counter()
            if n > 0 and first is None:
                first = (n, now)
            if n >= total:
                rate = (n - first[0]) / (now - first[1]) if now > first[1] else float("nan")
                return rate, cpu_seconds(proc)
            if now > deadline:
                sys.exit(f"{case}: only {n} of {total} rows (log: {logf.name})")
            time.sleep(0.005)
    finally:
        procs.stop_all()


def main():
    global P, NAMES, NESTED, APPLICATION, PARTITIONS
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--ravel", default=os.path.join(ROOT, "target", "release", "ravel"))
    ap.add_argument("--p", type=int, default=P, help="features a row (default 100)")
    ap.add_argument("--partitions", type=int, default=PARTITIONS,
                    help="partitions a topic (default 64; the embedded broker keeps 5 MB each)")
    ap.add_argument("--decimals", type=int, default=None,
                    help="write every number with this many decimals (default: full precision)")
    ap.add_argument("--cases", default=",".join(CASES),
                    help="comma-separated, of: " + ", ".join(CASES))
    args = ap.parse_args()
    P, PARTITIONS = args.p, args.partitions
    NAMES = [f"f{j}" for j in range(P)]
    NESTED = [f"{'a' if j < P // 2 else 'b'}.f{j}" for j in range(P)]
    APPLICATION = [f"sale.{'store' if j < P // 2 else 'basket'}.f{j}" for j in range(P)]
    cases = [c.strip() for c in args.cases.split(",")]
    if any(c not in CASES for c in cases):
        sys.exit(f"--cases: each of {', '.join(CASES)}")
    workdir = tempfile.mkdtemp(prefix="ravel-bench-fields-")
    x, y = data(args.rows, decimals=args.decimals)
    topics = {c: "bench." + c.replace(" ", "-") for c in cases}
    results = {c: ([], []) for c in cases}
    procs = Procs()
    with open(os.path.join(workdir, "bench.log"), "a") as logf:
        try:
            # Each stream's dead-letter topic too: the service is not ready without it. Many
            # partitions: the embedded broker keeps a bounded log per partition and drops the
            # oldest messages beyond it (the service then counts them as lost).
            names = [f"{t}:{PARTITIONS}" for t in topics.values()]
            names += [f"{t}.dlq:1" for t in topics.values()]
            _, bootstrap = start_broker(procs, args.ravel, names, logf)
            for c in cases:
                msgs = messages(c, x, y)
                print(f"filling {c}: {len(msgs)} messages", file=sys.stderr)
                fill(bootstrap, topics[c], PARTITIONS, msgs, len(msgs))
            for k in range(args.rounds):
                for c in cases:
                    rate, cpu = serve_once(args.ravel, bootstrap, c, topics[c], args.rows, workdir,
                                           logf, f"g{k}-{c.replace(' ', '-')}")
                    results[c][0].append(rate)
                    results[c][1].append(cpu)
                    print(f"round {k + 1} {c}: {rate:,.0f} rows/s, {cpu:.2f} CPU s", file=sys.stderr)
        finally:
            procs.stop_all()
    base = {c: (statistics.median(results[c][0]), statistics.median(results[c][1]))
            for c in ("positional batches", "positional rows") if c in results}
    digits = "full precision" if args.decimals is None else f"{args.decimals} decimals"
    print(f"p = {P}, {args.rows:,} rows a case ({digits}), medians of {args.rounds} rounds\n")
    print("| messages | rows/s (first to last) | service CPU s per million rows "
          "| rows/s against positional | CPU a row against positional |")
    print("|---|---|---|---|---|")
    for c in cases:
        rate = statistics.median(results[c][0])
        cpu = statistics.median(results[c][1])
        ref = base.get("positional rows" if "rows" in c or "events" in c else "positional batches")
        against = f"{rate / ref[0]:.2f}x" if ref else "-"
        cpu_against = f"{cpu / ref[1]:.2f}x" if ref else "-"
        print(f"| {c} | {rate:,.0f} | {cpu / args.rows * 1e6:.2f} | {against} | {cpu_against} |")


if __name__ == "__main__":
    main()
