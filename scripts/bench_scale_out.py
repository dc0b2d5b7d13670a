"""Scale-out with the Kafka state store (state.store = "kafka"), measured on whole processes.

1. Catch-up for 1, 2 and 3 `ravel serve` replicas in one consumer group on a 6-partition
   topic pre-filled with N rows (p = 10, binary): seconds from starting them until all are
   ready, and until every replica's view holds all N rows (each folds its share and merges
   the others' states), polled every 20 ms; and the rows folded over the group. On a 2-core
   machine the replicas and the broker share the cores, and the group's joins dominate, so
   this shows the overhead of running several, not a speed-up.
2. The cost of writing the state: one replica, one partition receiving rows continuously,
   a state round every 200 ms; the mean of `ravel_checkpoint_seconds` (encode, produce,
   acknowledgement) and the record size, at p = 100 and p = 1000.

The embedded broker (librdkafka's mock cluster) keeps about 5 MB per partition, which bounds
N here (p = 10 binary: 88 bytes a row) and means a p = 1000 state (about 6 MB) is written and
acknowledged but does not stay whole in the log: part 2 measures the write, not a restore.

Run: cargo build --release && python3 scripts/bench_scale_out.py [--rows 240000]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAVEL = os.path.join(ROOT, "target", "release", "ravel")


def start(args, log):
    p = subprocess.Popen([RAVEL] + args, stdout=subprocess.PIPE, stderr=open(log, "w"),
                         text=True)
    line = p.stdout.readline().strip()
    if not line:
        sys.exit(f"{args[0]} printed nothing; see {log}")
    return p, line


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            body = r.read().decode()
            return r.status, body
    except urllib.error.HTTPError as e:
        return e.code, ""
    except Exception:
        return 0, ""


def config(path, group, p, interval_ms):
    with open(path, "w") as f:
        f.write(f"""
[http]
addr = "127.0.0.1:0"
[kafka]
group_id = "{group}"
[kafka.options]
"session.timeout.ms" = "6000"
"heartbeat.interval.ms" = "500"
[state]
store = "kafka"
checkpoint_interval_ms = {interval_ms}
[demo]
enabled = false
[[streams]]
name = "r"
topic = "t.{group}"
features = {p}
""")


def serve(cfg, brokers, log):
    env = dict(os.environ, RAVEL_KAFKA__BROKERS=brokers)
    p = subprocess.Popen([RAVEL, "serve", "--config", cfg], stdout=subprocess.PIPE,
                         stderr=open(log, "w"), text=True, env=env)
    line = p.stdout.readline().strip()
    if not line.startswith("listening on "):
        sys.exit(f"serve: {line!r}; see {log}")
    return p, line[len("listening on "):]


def n_of(base):
    status, body = get(f"{base}/v1/streams/r")
    return json.loads(body)["n"] if status == 200 else -1


def produce(brokers, topic, spec, extra=()):
    subprocess.run([RAVEL, "produce", "--brokers", brokers, "--topic", topic, "--synthetic", spec,
                    "--wire-format", "binary", "--batch-rows", "100", "--quiet",
                    "-X", "sticky.partitioning.linger.ms=0", *extra], check=True,
                   stdout=subprocess.DEVNULL)


def catch_up(tmp, brokers, replicas, rows, group):
    cfg = os.path.join(tmp, f"{group}.toml")
    config(cfg, group, 10, 1000)
    produce(brokers, f"t.{group}", f"p=10,k=3,n={rows},seed=1")
    t0 = time.perf_counter()
    procs = [serve(cfg, brokers, os.path.join(tmp, f"{group}-{i}.log")) for i in range(replicas)]
    while not all(get(f"{b}/readyz")[0] == 200 for _, b in procs):
        time.sleep(0.02)
    ready = time.perf_counter() - t0
    while not all(n_of(b) == rows for _, b in procs):
        time.sleep(0.02)
        if time.perf_counter() - t0 > 300:
            sys.exit(f"{group}: rows did not all arrive: {[n_of(b) for _, b in procs]}")
    done = time.perf_counter() - t0
    applied = 0
    for _, b in procs:
        _, m = get(f"{b}/metrics")
        applied += float(re.search(r'^ravel_observations_applied_total\{stream="r"\} (\S+)', m,
                                   re.M).group(1))
    for p, _ in procs:
        p.terminate()
        p.wait()
    return ready, done, applied


def publish_cost(tmp, brokers, p, group):
    cfg = os.path.join(tmp, f"{group}.toml")
    config(cfg, group, p, 200)
    proc, base = serve(cfg, brokers, os.path.join(tmp, f"{group}.log"))
    stop = time.time() + 6
    # Rows keep arriving, so every round has a changed partition to write.
    while time.time() < stop:
        produce(brokers, f"t.{group}", f"p={p},k=3,n=200,seed={int(time.time() * 1000) % 100000}")
        time.sleep(0.05)
    time.sleep(1)
    _, metrics = get(f"{base}/metrics")
    proc.terminate()
    proc.wait()
    total = float(re.search(r'^ravel_checkpoint_seconds_sum\{stream="r"\} (\S+)', metrics, re.M).group(1))
    count = float(re.search(r'^ravel_checkpoint_seconds_count\{stream="r"\} (\S+)', metrics, re.M).group(1))
    return total / max(count, 1), int(count)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=240_000)
    args = ap.parse_args()
    if not os.path.exists(RAVEL):
        sys.exit("build the release binary first: cargo build --release")
    with tempfile.TemporaryDirectory() as tmp:
        topics = []
        for k in (1, 2, 3):
            topics += ["--topic", f"t.bench{k}:6", "--topic", f"t.bench{k}.dlq:1", "--topic", f"bench{k}.state:6"]
        for p in (100, 1000):
            topics += ["--topic", f"t.pub{p}:1", "--topic", f"t.pub{p}.dlq:1", "--topic", f"pub{p}.state:1"]
        broker, brokers = start(["broker", *topics], os.path.join(tmp, "broker.log"))
        try:
            print(f"catch-up of {args.rows} rows (p = 10, 6 partitions, binary), whole processes:")
            print("seconds from starting the replicas until all are ready (in the group) and until")
            print("every replica's view holds every row; rows folded over the group (> N: re-read")
            print("after a partition moved during the joins)")
            print(f"{'replicas':>8} {'ready s':>9} {'all rows s':>11} {'rows folded':>12}")
            for k in (1, 2, 3):
                ready, done, applied = catch_up(tmp, brokers, k, args.rows, f"bench{k}")
                print(f"{k:>8} {ready:>9.2f} {done:>11.2f} {applied:>12.0f}")
            print()
            # Record sizes: CBOR of the p x p moments (9 bytes a value below the diagonal,
            # 3 for the zeros above): about 60 kB at p = 100, 6 MB at p = 1000.
            print(f"{'state write (one partition)':<28} {'mean ms':>8} {'rounds':>7}")
            for p in (100, 1000):
                mean, count = publish_cost(tmp, brokers, p, f"pub{p}")
                print(f"{f'p = {p}':<28} {mean * 1000:>8.1f} {count:>7}")
        finally:
            broker.terminate()
            broker.wait()


if __name__ == "__main__":
    main()
