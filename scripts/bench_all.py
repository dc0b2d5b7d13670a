#!/usr/bin/env python3
"""Every end-to-end comparison of issue 14 in one run: ravel (release build) next to its peer,
as whole processes, in interleaved rounds (ravel, peer, ravel, peer, ...), one table.

1. `ravel fit FILE --method ols` next to numpy / pandas doing the same job (bench_e2e.py's
   peer for NPY: memory-map, X'X in batches of 4096 rows, solve; for CSV `pandas.read_csv`
   then the same numpy): NPY C and Fortran order at p = 100 (n = 400k) and p = 1000 (n = 40k),
   CSV at p = 100 (n = 100k).
2. `ravel serve` reading a topic filled beforehand on `ravel broker` (128 partitions: the
   embedded broker keeps 5 MB a partition) next to a bare rdkafka consumer with the service's
   client settings that reads the same topic and only counts (`examples/bare_consumer.rs`):
   binary and JSON mini-batches at p = 100 and p = 1000, and streams of tiny messages (one
   row each, binary and JSON at p = 100: what costs per message rather than per row). ravel's
   time runs from the process start to the first `GET /v1/streams` showing every row (polled
   every 5 ms; the list, not the stream's own page, whose means would cost the service CPU), the
   consumer's from its start to its exit after the last message; both include the group join.
   The rate columns are rows over that whole-process time, and in brackets from the first
   row (message) to the last, where the start and the join do not count. With `--before BINARY` an older
   ravel is measured in the same rounds (a third column).
3. A feature stream at n = 10,000 samples (s = 50, 2000 distinct JSON columns each sent once
   through `ravel broker`, the producer kept at most 20 columns ahead: one partition of 5 MB)
   next to `ravel select --passes 1` (the library's own OS, one pass) on the same 2000 columns
   in an NPY file: the same job. ravel serve's features/s from its first feature applied to
   the last, `ravel select`'s over its whole process (reading the file included).

Run: pip install numpy pandas confluent-kafka
     cargo build --release && cargo build --release --example bare_consumer
     python3 scripts/bench_all.py [--rounds 3] [--only fit,csv,ingest,features] [--before PATH]
         [--cases binary100,json100,binary1000,json1000,binary100x1,json100x1]
Prints the table (Markdown) on stdout, progress on stderr.
"""

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_e2e  # noqa: E402
from bench_freshness import Procs, cpu_seconds, start_broker, start_serve  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CSV_PEER = r"""
import sys
import numpy as np
import pandas as pd
x = pd.read_csv(sys.argv[1]).to_numpy(dtype=np.float64)
n, w = x.shape
p = w - 1
g = np.zeros((w, w))
s = np.zeros(w)
for i in range(0, n, 4096):
    b = x[i:i + 4096]
    g += b.T @ b
    s += b.sum(axis=0)
mean = s / n
c = g / n - np.outer(mean, mean)
beta = np.linalg.solve(c[:p, :p], c[:p, p])
print(mean[p] - mean[:p] @ beta, beta[:3])
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def timed(cmd, **kw):
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True, **kw).stdout
    return time.perf_counter() - t, out


# ---------------------------------------------------------------------------------------------
# 1. ravel fit


def fit_cases(workdir):
    cases = []
    for p, n in [(100, 400_000), (1000, 40_000)]:
        for order in ["C", "F"]:
            path = os.path.join(workdir, f"p{p}_n{n}_{order}.npy")
            bench_e2e.make(path, n, p, order == "F")
            cases.append((f"fit OLS, NPY {order}-order, p = {p}, n = {n // 1000}k", path, "numpy", n))
    p, n = 100, 100_000
    csv = os.path.join(workdir, f"p{p}_n{n}.csv")
    if not os.path.exists(csv):
        rng = np.random.default_rng(8)
        x = rng.standard_normal((n, p + 1))
        x[:, p] = x[:, :10] @ np.arange(1, 11) + rng.standard_normal(n)
        header = ",".join([f"x{j}" for j in range(p)] + ["y"])
        np.savetxt(csv, x, delimiter=",", header=header, comments="", fmt="%.17g")
    cases.append((f"fit OLS, CSV (%.17g), p = {p}, n = {n // 1000}k", csv, "pandas + numpy", n))
    return cases


def bench_fit(args, workdir, rows):
    npy_peer = os.path.join(workdir, "peer_ols.py")
    csv_peer = os.path.join(workdir, "peer_csv.py")
    for path, text in ((npy_peer, bench_e2e.PEER), (csv_peer, CSV_PEER)):
        with open(path, "w") as f:
            f.write(text)
    for job, path, peer_name, n in fit_cases(workdir):
        if ("csv" if path.endswith(".csv") else "fit") not in args.only:
            continue
        peer = csv_peer if path.endswith(".csv") else npy_peer
        r, q = [], []
        for k in range(args.rounds):
            log(f"{job}: round {k + 1}")
            r.append(timed([args.ravel, "fit", path, "--method", "ols"])[0])
            q.append(timed([sys.executable, peer, path])[0])
        rows.append((job, f"{fmt_s(r)} ({n / statistics.median(r):,.0f} rows/s)", peer_name,
                     f"{fmt_s(q)} ({n / statistics.median(q):,.0f} rows/s)",
                     statistics.median(q) / statistics.median(r), None))


def fmt_s(values):
    return f"{statistics.median(values):.3f} s"


# ---------------------------------------------------------------------------------------------
# 2. ravel serve vs a bare consumer


def messages(p, per_message, fmt, distinct=20, seed=5):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(distinct):
        x = rng.standard_normal((per_message, p))
        y = x[:, :10] @ np.arange(1, 11) + rng.standard_normal(per_message)
        if fmt == "binary":
            out.append(b"RVB1" + struct.pack("<II", per_message, p) + x.tobytes() + y.tobytes())
        else:
            out.append(json.dumps({"rows": x.tolist(), "y": y.tolist()}).encode())
    return out


def fill(bootstrap, topic, partitions, msgs, count):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "message.max.bytes": 10_000_000})
    for i in range(count):
        while True:
            try:
                producer.produce(topic, msgs[i % len(msgs)], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(300) != 0:
        sys.exit("the topic could not be filled")


def rows_seen(api, stream):
    """The stream's rows from `GET /v1/streams` (a summary of a few hundred bytes) rather than
    `GET /v1/streams/{name}`, whose p names, means and deviations (about 40 kB at p = 1000),
    serialized every 5 ms, took about a tenth of the service's CPU from the ingest."""
    status, body = api.get("/v1/streams")
    if status != 200:
        return 0
    return next((s["n"] for s in json.loads(body)["streams"] if s["name"] == stream), 0)


def serve_once(ravel, bootstrap, p, total, workdir, logf, group, folds=0, deadline_s=600,
               stream_toml=None, sections="", poll_s=0.005):
    """Seconds from process start to every row visible; rows/s from the first row to the last;
    the process's CPU seconds by then (less sensitive than the times to other work on the
    machine). `stream_toml` replaces the stream's `features = p` line (named fields, a format);
    `sections` is more configuration ([schema_registry] ...). `poll_s`: how often the rows are
    asked for (`GET /v1/streams`; the service's CPU includes answering it)."""
    cfg = os.path.join(workdir, f"{group}.toml")
    with open(cfg, "w") as f:
        f.write(f'[http]\naddr = "127.0.0.1:0"\n\n[kafka]\nbrokers = "{bootstrap}"\ngroup_id = "{group}"\n')
        f.write('[kafka.options]\n"session.timeout.ms" = "6000"\n\n')
        # A fresh state directory: every run starts from the beginning of the topic.
        f.write(f'[state]\ndir = "{tempfile.mkdtemp(dir=workdir)}"\n\n[demo]\nenabled = false\n\n')
        f.write(sections)
        f.write('[[streams]]\nname = "tput"\ntopic = "bench.tput"\n')
        f.write(stream_toml or f"features = {p}\n")
        if folds:
            # Exact K-fold CV statistics beside the totals (scripts/bench_folds.py).
            f.write(f"cv.folds = {folds}\n")
    procs = Procs()
    try:
        start = time.perf_counter()
        proc, api = start_serve(procs, ravel, cfg, logf)
        first = None
        deadline = start + deadline_s
        while True:
            n, now = rows_seen(api, "tput"), time.perf_counter()
            if n > 0 and first is None:
                first = (n, now)
            if n >= total:
                rate = (n - first[0]) / (now - first[1]) if now > first[1] else float("nan")
                return now - start, rate, cpu_seconds(proc)
            if now > deadline:
                sys.exit(f"only {n} of {total} rows applied (log: {logf.name})")
            time.sleep(poll_s)
    finally:
        procs.stop_all()


def case_name(fmt, p, per):
    """`--cases` names: binary100, json1000, ...; json100x1 for one row a message."""
    return f"{fmt}{p}" + ("x1" if per == 1 else "")


def bench_ingest(args, workdir, rows):
    bare = os.path.join(os.path.dirname(args.ravel), "examples", "bare_consumer")
    if not os.path.exists(bare):
        sys.exit("build the peer first: cargo build --release --example bare_consumer")
    cases = [  # format, p, rows per message, messages
        ("binary", 100, 100, 5_000),
        ("json", 100, 100, 1_500),
        ("binary", 1000, 10, 5_000),
        ("json", 1000, 10, 1_500),
        # Tiny messages, one row each: what costs per message rather than per row.
        ("binary", 100, 1, 150_000),
        ("json", 100, 1, 150_000),
    ]
    for fmt, p, per, count in cases:
        if args.cases and case_name(fmt, p, per) not in args.cases:
            continue
        total = per * count
        procs = Procs()
        with open(os.path.join(workdir, "ingest.log"), "a") as logf:
            try:
                _, bootstrap = start_broker(procs, args.ravel, ["bench.tput:128", "bench.tput.dlq:1"], logf)
                msgs = messages(p, per, fmt)
                mb = sum(len(m) for m in msgs) / len(msgs) * count / 1e6
                log(f"ingest {fmt} p = {p}: filling {count} messages ({mb:.0f} MB)")
                fill(bootstrap, "bench.tput", 128, msgs, count)
                r, q, b, rr, br, qr, rc, bc = [], [], [], [], [], [], [], []
                for k in range(args.rounds):
                    log(f"ingest {fmt} p = {p}: round {k + 1}")
                    s, rate, cpu = serve_once(args.ravel, bootstrap, p, total, workdir, logf, f"r{k}-{fmt}{p}")
                    r.append(s)
                    rr.append(rate)
                    rc.append(cpu)
                    t, out = timed([bare, "--brokers", bootstrap, "--topic", "bench.tput", "--messages", str(count)])
                    q.append(t)
                    qr.append(total / json.loads(out)["seconds"])
                    if args.before:
                        s, rate, cpu = serve_once(args.before, bootstrap, p, total, workdir, logf, f"b{k}-{fmt}{p}")
                        b.append(s)
                        br.append(rate)
                        bc.append(cpu)
            finally:
                procs.stop_all()
        job = f"serve, Kafka {fmt} p = {p}, {total // 1000}k rows ({mb:.0f} MB), {per} row{'s' if per > 1 else ''}/message"
        ravel_cell = (f"{fmt_s(r)}: {total / statistics.median(r):,.0f} rows/s (first to last "
                      f"{statistics.median(rr):,.0f}; {statistics.median(rc):.2f} CPU s)")
        if args.before:
            ravel_cell += (f"; before: {fmt_s(b)}: {total / statistics.median(b):,.0f} rows/s (first to last "
                           f"{statistics.median(br):,.0f}; {statistics.median(bc):.2f} CPU s)")
        rows.append((job, ravel_cell, "bare rdkafka consumer",
                     f"{fmt_s(q)}: {total / statistics.median(q):,.0f} rows/s (first to last {statistics.median(qr):,.0f})",
                     statistics.median(q) / statistics.median(r), statistics.median(rr) / statistics.median(qr)))


# ---------------------------------------------------------------------------------------------
# 3. Feature streams


def bench_features(args, workdir, rows):
    n, s, p = 10_000, 50, 2_000
    rng = np.random.default_rng(9)
    # The same job on both sides: p distinct columns, each sent once (one pass).
    cols = rng.standard_normal((n, p))
    y = cols[:, :10] @ np.arange(1, 11) + rng.standard_normal(n)
    npy = os.path.join(workdir, f"features_n{n}_p{p}_distinct.npy")
    if not os.path.exists(npy):
        np.save(npy, np.column_stack([cols, y]))
    labels = json.dumps({"labels": y.tolist()}).encode()
    log(f"features n = {n}: encoding {p} columns")
    # Encoded once beforehand (about 400 MB): json.dumps takes about 6 ms a column, which would
    # hold the producer under the service's rate.
    payloads = [json.dumps({"feature": f"f{j}", "values": cols[:, j].tolist()}).encode() for j in range(p)]
    kb = len(payloads[0]) / 1e3
    r, q, b = [], [], []
    for k in range(args.rounds):
        log(f"features n = {n}: round {k + 1}")
        r.append(serve_features(args.ravel, workdir, n, s, p, labels, payloads, f"f{k}"))
        t, _ = timed([args.ravel, "select", npy, "--s", str(s), "--passes", "1"])
        q.append(p / t)
        if args.before:
            b.append(serve_features(args.before, workdir, n, s, p, labels, payloads, f"fb{k}"))
    rr, qq = statistics.median(r), statistics.median(q)
    cell = f"{rr:,.0f} features/s"
    if args.before:
        cell += f"; before: {statistics.median(b):,.0f} features/s"
    rows.append((f"feature stream n = {n}, s = {s}, {p} distinct JSON columns ({kb:.0f} kB each), one pass, OS",
                 cell, "ravel select --passes 1 (NPY file)", f"{qq:,.0f} features/s", rr / qq, None))


def serve_features(ravel, workdir, n, s, p, labels, payloads, group):
    """Features/s of `ravel serve` from the first feature applied to the last (the producer
    kept at most 20 columns ahead of what the service shows)."""
    from confluent_kafka import Producer

    procs = Procs()
    with open(os.path.join(workdir, "features.log"), "a") as logf:
        try:
            _, bootstrap = start_broker(procs, ravel, ["bench.features:1"], logf)
            cfg = os.path.join(workdir, f"{group}.toml")
            with open(cfg, "w") as f:
                f.write(f'[http]\naddr = "127.0.0.1:0"\n\n[kafka]\nbrokers = "{bootstrap}"\ngroup_id = "{group}"\n')
                f.write(f'[state]\ndir = "{tempfile.mkdtemp(dir=workdir)}"\n\n[demo]\nenabled = false\n\n')
                f.write(f'[[feature_streams]]\nname = "fbench"\ntopic = "bench.features"\nn = {n}\ns = {s}\n')
            proc, api = start_serve(procs, ravel, cfg, logf)
            producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "message.max.bytes": 10_000_000})
            producer.produce("bench.features", labels)
            sent, seen, first = 0, 0, None
            while seen < p:
                while sent < p and sent <= seen + 20:
                    producer.produce("bench.features", payloads[sent])
                    sent += 1
                producer.flush(10)
                status, body = api.get("/v1/feature-streams/fbench")
                seen = json.loads(body).get("features_seen", 0) if status == 200 else 0
                if seen > 0 and first is None:
                    first = (seen, time.perf_counter())
                time.sleep(0.001)
            return (p - first[0]) / (time.perf_counter() - first[1])
        finally:
            procs.stop_all()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="fit,csv,ingest,features",
                    help="comma-separated parts: fit (NPY), csv, ingest, features")
    ap.add_argument("--cases", help="comma-separated ingest cases to run (binary100, json100, binary1000, json1000, and one row a message: "
                    "binary100x1, json100x1); all by default")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "ravel-bench"))
    ap.add_argument("--ravel", default=os.path.join(ROOT, "target", "release", "ravel"))
    ap.add_argument("--before", help="an older ravel binary, measured in the same ingest and feature rounds")
    args = ap.parse_args()
    if not os.path.exists(args.ravel):
        sys.exit("build the release binary first: cargo build --release")
    os.makedirs(args.dir, exist_ok=True)
    only = set(args.only.split(","))
    args.only = only
    args.cases = set(args.cases.split(",")) if args.cases else None
    rows = []
    if only & {"fit", "csv"}:
        bench_fit(args, args.dir, rows)
    if "ingest" in only:
        bench_ingest(args, args.dir, rows)
    if "features" in only:
        bench_features(args, args.dir, rows)
    load = os.getloadavg()
    print(f"{args.rounds} interleaved rounds, medians, whole processes; load average at the end "
          f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs\n")
    print("| job | ravel | peer | peer figure | ravel vs peer (> 1: ravel faster) |")
    print("|---|---|---|---|---|")
    for job, ravel, peer, peer_cell, ratio, inner in rows:
        extra = f"; first to last {inner:.2f}" if inner is not None else ""
        print(f"| {job} | {ravel} | {peer} | {peer_cell} | {ratio:.2f}{extra} |")


if __name__ == "__main__":
    main()
