#!/usr/bin/env python3
"""Freshness benchmark (issue 20): how long a produced row takes to reach the model, as a user
sees it, and what ingest throughput is, with the release binary.

For each binary (--ravel, and --before for a comparison column), as a user runs it:

1. `ravel broker` (the embedded broker, its own process) and `ravel serve --config` with the
   default settings, two streams: `probe` (p = 10) and `load` (p = 100).
2. Ack to visible, idle: one 1-row message to `probe` every 50 ms; for each, the time from the
   producer's delivery acknowledgement to the first `GET /v1/streams/probe` that shows the new
   n (polled every 0.5 ms over one kept-alive connection: a poll's round trip and up to about
   1 ms of polling period are included).
3. The same while a second process produces --load-rate rows/s (default 50 000) at p = 100 to
   `load` (16 partitions) on the same service (100-row messages, --load-format json or binary),
   with the load's rows/s applied meanwhile and its mean rows per fold.
4. Ingest rows/s: a fresh broker and service; a 128-partition topic filled beforehand (p = 100:
   150 000 rows as JSON, 500 000 as binary, 100 rows a message; the embedded broker keeps 5 MB
   a partition) is read from the first row applied to the last (n polled every 5 ms), with the
   service's CPU time over the same span (less sensitive than rows/s to other work on the
   machine) and its mean rows per fold. Rounds alternate between the binaries; the median
   and the range are shown.

Prints one table (Markdown) on stdout, progress on stderr. Needs `pip install confluent-kafka`.
To compare with main, build main's binary in its own target directory (cargo would take a
shared one's artifacts for up to date, the two workspaces' crates having the same names):

    git archive main | (mkdir -p /tmp/ravel-main-src && tar -x -C /tmp/ravel-main-src)
    (cd /tmp/ravel-main-src && cargo build --release) && cp /tmp/ravel-main-src/target/release/ravel /tmp/ravel-main
    cargo build --release
    python3 scripts/bench_freshness.py --ravel target/release/ravel --before /tmp/ravel-main
"""

import argparse
import http.client
import json
import os
import random
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Producer

PROBE_P = 10
LOAD_P = 100
ROWS_PER_MESSAGE = 100


# ---------------------------------------------------------------------------------------------
# Messages


def rows(p, n, rng):
    beta = [rng.gauss(0, 1) if j < 10 else 0.0 for j in range(p)]
    out = []
    for _ in range(n):
        x = [rng.gauss(0, 1) for _ in range(p)]
        y = sum(b * v for b, v in zip(beta, x)) + rng.gauss(0, 0.1)
        out.append((x, y))
    return out


def encode(batch, fmt):
    """A mini-batch message in one of the formats ingest reads (docs/streams.md "Message formats")."""
    if fmt == "json":
        return json.dumps({"rows": [x for x, _ in batch], "y": [y for _, y in batch]}).encode()
    p = len(batch[0][0])
    xs = [v for x, _ in batch for v in x]
    ys = [y for _, y in batch]
    return b"RVB1" + struct.pack("<II", len(batch), p) + struct.pack(f"<{len(xs) + len(ys)}d", *xs, *ys)


def messages(p, fmt, distinct, seed):
    rng = random.Random(seed)
    return [encode(rows(p, ROWS_PER_MESSAGE, rng), fmt) for _ in range(distinct)]


# ---------------------------------------------------------------------------------------------
# Processes


class Procs:
    """The processes this script started; stopped (by their own pid) on exit."""

    def __init__(self):
        self.procs = []

    def start(self, args, log):
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
        self.procs.append(proc)
        return proc

    def stop(self, proc):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.remove(proc)

    def stop_all(self):
        for proc in list(reversed(self.procs)):
            self.stop(proc)


def start_broker(procs, ravel, topics, log):
    args = [ravel, "broker"]
    for t in topics:
        args += ["--topic", t]
    proc = procs.start(args, log)
    bootstrap = proc.stdout.readline().strip()
    if not bootstrap:
        sys.exit(f"ravel broker did not print its address (log: {log.name})")
    return proc, bootstrap


def start_serve(procs, ravel, cfg, log):
    """`ravel serve --config CFG` (its [http] addr a free port): the process and its API, once it
    prints the address it listens on."""
    proc = procs.start([ravel, "serve", "--config", cfg], log)
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on http://"):
        sys.exit(f"ravel serve did not start: {line!r} (log: {log.name})")
    host, port = line.removeprefix("listening on http://").rsplit(":", 1)
    return proc, Api(host, int(port))


def start_service(procs, ravel, bootstrap, streams, workdir, log, ready=True):
    """`ravel serve` with the default configuration but for its streams and a free port;
    waits until it is ready when asked to."""
    cfg = os.path.join(workdir, "ravel.toml")
    with open(cfg, "w") as f:
        f.write(f'[http]\naddr = "127.0.0.1:0"\n\n[kafka]\nbrokers = "{bootstrap}"\n\n')
        f.write(f'[state]\ndir = "{os.path.join(workdir, "state")}"\n\n[demo]\nenabled = false\n\n')
        for name, topic, p in streams:
            f.write(f'[[streams]]\nname = "{name}"\ntopic = "{topic}"\nfeatures = {p}\n\n')
    proc, api = start_serve(procs, ravel, cfg, log)
    deadline = time.monotonic() + 120
    while ready and api.get("/readyz")[0] != 200:
        if time.monotonic() > deadline:
            sys.exit(f"ravel serve never became ready (log: {log.name})")
        time.sleep(0.05)
    return proc, api


class Api:
    """GETs over one kept-alive connection."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.conn = None

    def get(self, path):
        for attempt in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                self.conn.request("GET", path)
                r = self.conn.getresponse()
                body = r.read()
                return r.status, body
            except (http.client.HTTPException, OSError):
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def n(self, stream):
        status, body = self.get(f"/v1/streams/{stream}")
        return json.loads(body)["n"] if status == 200 else 0


# ---------------------------------------------------------------------------------------------
# Measurements


def ack_to_visible(api, bootstrap, samples, interval):
    """Latencies (ms) from delivery acknowledgement to the new n over HTTP, one message per
    interval."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    rng = random.Random(7)
    out = []
    n = api.n("probe")
    acked = []
    for _ in range(samples):
        start = time.perf_counter()
        x = [rng.gauss(0, 1) for _ in range(PROBE_P)]
        payload = json.dumps({"x": x, "y": sum(x)}).encode()

        def delivered(err, _msg):
            if err is not None:
                sys.exit(f"probe message not delivered: {err}")
            acked.append(time.perf_counter())

        producer.produce("bench.probe", payload, partition=0, on_delivery=delivered)
        producer.flush(30)
        t_ack = acked[-1]
        n += 1
        while api.n("probe") < n:
            if time.perf_counter() - t_ack > 30:
                sys.exit("a probe row was not visible after 30 s")
            time.sleep(0.0005)  # back to back, the polls would take a core from the service
        out.append((time.perf_counter() - t_ack) * 1000)
        rest = interval - (time.perf_counter() - start)
        if rest > 0:
            time.sleep(rest)
    return out


def load_worker(args):
    """Produces args.rate rows/s to args.topic until stopped (SIGTERM)."""
    msgs = messages(LOAD_P, args.load_format, 20, 3)
    producer = Producer({"bootstrap.servers": args.brokers, "linger.ms": 5})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    start = time.perf_counter()
    sent = 0
    while not stop.is_set():
        due = int((time.perf_counter() - start) * args.rate / ROWS_PER_MESSAGE)
        while sent < due:
            try:
                producer.produce(args.topic, msgs[sent % len(msgs)])
            except BufferError:
                break
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(10)


def fill(bootstrap, topic, partitions, total_rows, fmt):
    msgs = messages(LOAD_P, fmt, 20, 5)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(total_rows // ROWS_PER_MESSAGE):
        while True:
            try:
                producer.produce(topic, msgs[i % len(msgs)], partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(120) != 0:
        sys.exit("the topic could not be filled")


def cpu_seconds(proc):
    """User + system CPU time of a process so far (Linux)."""
    with open(f"/proc/{proc.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batch_rows(api, stream):
    """(folds, mean rows per fold) of a stream so far, from /metrics."""
    text = api.get("/metrics")[1].decode()
    got = {}
    for line in text.splitlines():
        for what in ("count", "sum"):
            if line.startswith(f'ravel_ingest_batch_rows_{what}{{stream="{stream}"}} '):
                got[what] = float(line.rsplit(" ", 1)[1])
    return got["count"], got["sum"] / got["count"] if got["count"] else float("nan")


def throughput(ravel, fmt, total_rows, logdir):
    """Rows/s of one service reading a filled topic, first row applied to last; its CPU
    seconds per million rows; the mean rows per fold."""
    procs = Procs()
    try:
        with tempfile.TemporaryDirectory() as work, open(os.path.join(logdir, f"tput-{fmt}.log"), "a") as log:
            _, bootstrap = start_broker(procs, ravel, ["bench.tput:128", "bench.tput.dlq:1"], log)
            fill(bootstrap, "bench.tput", 128, total_rows, fmt)
            # Not waiting for /readyz: rows may be applied before it says ready.
            svc, api = start_service(procs, ravel, bootstrap, [("tput", "bench.tput", LOAD_P)], work, log, ready=False)
            first, deadline = None, time.monotonic() + 300
            while True:
                n, now = api.n("tput"), time.perf_counter()
                if n > 0 and first is None:
                    first = (n, now, cpu_seconds(svc))
                if n >= total_rows:
                    rows = n - first[0]
                    rate = rows / (now - first[1]) if now > first[1] else float("nan")
                    cpu = (cpu_seconds(svc) - first[2]) / rows * 1e6
                    return rate, cpu, batch_rows(api, "tput")[1]
                if time.monotonic() > deadline:
                    sys.exit(f"only {n} of {total_rows} rows applied (log: {log.name})")
                time.sleep(0.005)
    finally:
        procs.stop_all()


def latency(ravel, args, logdir):
    """Ack-to-visible latencies idle and under load, and the load's achieved rows/s."""
    procs = Procs()
    try:
        with tempfile.TemporaryDirectory() as work, open(os.path.join(logdir, "latency.log"), "a") as log:
            # 16 load partitions: the embedded broker keeps 5 MB a partition, 0.8 s of the JSON
            # load in all; a consumer further behind loses rows (offset out of range).
            topics = ["bench.probe:1", "bench.probe.dlq:1", "bench.load:16", "bench.load.dlq:1"]
            _, bootstrap = start_broker(procs, ravel, topics, log)
            streams = [("probe", "bench.probe", PROBE_P), ("load", "bench.load", LOAD_P)]
            _, api = start_service(procs, ravel, bootstrap, streams, work, log)
            ack_to_visible(api, bootstrap, 10, args.interval)  # warm-up
            out = {"idle": ack_to_visible(api, bootstrap, args.samples, args.interval)}
            for fmt in args.load_format:
                worker = procs.start(
                    [sys.executable, __file__, "--load-worker", "--brokers", bootstrap, "--topic", "bench.load",
                     "--rate", str(args.load_rate), "--load-format", fmt],
                    log,
                )
                time.sleep(3)  # the load reaches its rate
                n0, t0, (f0, m0) = api.n("load"), time.perf_counter(), batch_rows(api, "load")
                loaded = ack_to_visible(api, bootstrap, args.samples, args.interval)
                n1, t1, (f1, m1) = api.n("load"), time.perf_counter(), batch_rows(api, "load")
                procs.stop(worker)
                mean_batch = (f1 * m1 - f0 * m0) / (f1 - f0) if f1 > f0 else float("nan")
                out[fmt] = (loaded, (n1 - n0) / (t1 - t0), mean_batch)
                time.sleep(2)  # the service catches up before the next phase
            return out
    finally:
        procs.stop_all()


# ---------------------------------------------------------------------------------------------


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


def summary(values):
    return " / ".join(f"{pct(values, q):.1f}" for q in (50, 90, 99)) + f" / {max(values):.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ravel", default="target/release/ravel", help="the binary measured")
    ap.add_argument("--before", help="a second binary (e.g. main's) for a comparison column")
    ap.add_argument("--samples", type=int, default=200, help="probe messages per phase")
    ap.add_argument("--interval", type=float, default=0.05, help="seconds between probe messages")
    ap.add_argument("--load-rate", type=int, default=50_000, help="rows/s on the load stream")
    ap.add_argument("--load-format", default="json,binary",
                    help="formats of the load, one loaded phase each (json, binary or both)")
    ap.add_argument("--rounds", type=int, default=3, help="throughput rounds per binary and format")
    ap.add_argument("--logs", default=tempfile.gettempdir(), help="directory for the processes' logs")
    ap.add_argument("--load-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--brokers", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--rate", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load_worker:
        return load_worker(args)
    args.load_format = args.load_format.split(",")
    if not set(args.load_format) <= {"json", "binary"}:
        sys.exit("--load-format: json, binary or json,binary")

    binaries = [("after", args.ravel)] + ([("before", args.before)] if args.before else [])
    logdir = tempfile.mkdtemp(prefix="bench-freshness-", dir=args.logs)
    results = {label: {} for label, _ in binaries}
    for label, ravel in binaries:
        print(f"{label}: ack to visible, idle and under load ...", file=sys.stderr, flush=True)
        results[label]["lat"] = latency(ravel, args, logdir)
    for fmt, total in (("json", 150_000), ("binary", 500_000)):
        for r in range(args.rounds):
            for label, ravel in binaries:
                print(f"{label}: throughput {fmt}, round {r + 1} ...", file=sys.stderr, flush=True)
                results[label].setdefault(fmt, []).append(throughput(ravel, fmt, total, logdir))

    labels = [label for label, _ in binaries][::-1]  # before first
    lines = [("ack to visible, idle, ms: p50 / p90 / p99 / max", lambda r: summary(r["lat"]["idle"]))]
    for fmt in args.load_format:
        load = f"{args.load_rate // 1000}k rows/s p = {LOAD_P} {fmt} on another stream"
        lines += [
            (f"ack to visible, {load}, ms: p50 / p90 / p99 / max", lambda r, fmt=fmt: summary(r["lat"][fmt][0])),
            (f"{load}: rows/s applied meanwhile; mean rows per fold",
             lambda r, fmt=fmt: f"{r['lat'][fmt][1]:,.0f}; {r['lat'][fmt][2]:,.0f}"),
        ]

    def spread(values, fmt="{:,.0f}"):
        return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"

    for fmt, total in (("json", 150_000), ("binary", 500_000)):
        what = f"p = {LOAD_P} {fmt}, {total:,} rows, 128 partitions, median (min-max) of {args.rounds}"
        lines += [
            (f"ingest rows/s, {what}", lambda r, fmt=fmt: spread([x[0] for x in r[fmt]])),
            (f"service CPU s per million rows, {what}", lambda r, fmt=fmt: spread([x[1] for x in r[fmt]], "{:.2f}")),
            (f"mean rows per fold, {what}", lambda r, fmt=fmt: spread([x[2] for x in r[fmt]])),
        ]
    print(f"| measure | {' | '.join(labels)} |")
    print("|---|" + "---|" * len(labels))
    for name, cell in lines:
        print(f"| {name} | {' | '.join(cell(results[label]) for label in labels)} |")
    load = os.getloadavg()
    print(f"\n{args.samples} probe messages per phase, one every {args.interval * 1000:.0f} ms; "
          f"load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} on {os.cpu_count()} CPUs; "
          f"logs in {logdir}", file=sys.stderr)


if __name__ == "__main__":
    main()
