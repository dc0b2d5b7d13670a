#!/usr/bin/env python3
"""Seconds until replicas of a group are ready again (issue 59 item 4): two `ravel serve` in one
consumer group (`state.store = "kafka"`, one stream on an 8-partition topic holding rows) on
`ravel broker`, default settings. Two scenarios, `--tries` times each:

- kill:  SIGKILL replica A while both are ready, start A again: seconds from its start to
         /readyz 200, and until the two hold all 8 partitions between them, each some;
- term:  SIGTERM both (they exit), start A, then B `--gap` seconds later: seconds from each
         start to /readyz 200, and until both hold partitions. A member still not ready (or
         holding none while the other holds all 8) after `--give-up` seconds is stuck: its
         log's last lines are printed.

    scripts/replicas_rejoin.py [--ravel target/release/ravel] [--tries 10] [--gap 1]
                               [--give-up 120] [--keep] [--session-ms N]

Rows go to stdout as Markdown; `--keep` keeps the work directory (the logs).
"""

import argparse
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

TOPIC = "t.rejoin"
GROUP = "rejoin"
PARTS = 8


def first_line(proc):
    line = proc.stdout.readline().decode().strip()
    if not line:
        sys.exit(f"{proc.args[0]} printed nothing")
    return line


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        try:
            return e.code, json.loads(e.read() or b"null")
        except ValueError:
            return e.code, None
    except Exception:
        return None, None


def live(base):
    """Partitions the replica at `base` folds itself."""
    s, d = get(f"{base}/v1/streams/r")
    if s != 200 or not d:
        return 0
    return sum(1 for p in d.get("partition_states", []) if p.get("source") == "live")


class Replica:
    def __init__(self, ravel, work, brokers, name, run):
        env = dict(os.environ, RAVEL_KAFKA__BROKERS=brokers, RUST_LOG="info")
        self.log = work / f"serve-{name}-{run}.log"
        self.start = time.monotonic()
        self.p = subprocess.Popen([ravel, "serve", "--config", str(work / "ravel.toml")], env=env,
                                  stdout=subprocess.PIPE, stderr=open(self.log, "w"))
        self.base = first_line(self.p).removeprefix("listening on ")
        self.ready_at = None

    def poll(self):
        if self.ready_at is None and get(f"{self.base}/readyz")[0] == 200:
            self.ready_at = time.monotonic() - self.start
        return self.ready_at

    def stop(self, sig):
        self.p.send_signal(sig)
        self.p.wait(timeout=60)

    def tail(self, n=15):
        return "\n".join(self.log.read_text().splitlines()[-n:])


def settle(replicas, give_up):
    """Waits until every replica is ready and all hold the 8 partitions between them, each
    some; returns the seconds since the latest start (None: given up)."""
    t0 = max(r.start for r in replicas)
    while time.monotonic() - t0 < give_up:
        for r in replicas:
            r.poll()
        counts = [live(r.base) for r in replicas]
        if all(r.ready_at is not None for r in replicas) and sum(counts) == PARTS and min(counts) > 0:
            return time.monotonic() - t0
        time.sleep(0.1)
    return None


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--ravel", default="target/release/ravel")
    a.add_argument("--tries", type=int, default=10)
    a.add_argument("--gap", type=float, default=1.0)
    a.add_argument("--give-up", type=float, default=120.0)
    a.add_argument("--keep", action="store_true")
    a.add_argument("--session-ms", type=int, default=0,
                   help='kafka.options "session.timeout.ms" (0: ravel\'s default)')
    args = a.parse_args()
    ravel = os.path.abspath(args.ravel)
    work = pathlib.Path(tempfile.mkdtemp(prefix="replicas-rejoin-"))
    blog = open(work / "broker.log", "w")
    broker = subprocess.Popen([ravel, "broker", "--topic", f"{TOPIC}:{PARTS}", "--topic",
                               f"{TOPIC}.dlq:1", "--topic", f"{GROUP}.state:3"],
                              stdout=subprocess.PIPE, stderr=blog)
    brokers = first_line(broker)
    rows = work / "rows.csv"
    with open(rows, "w") as f:
        f.write("x0,x1,y\n")
        for i in range(20000):
            f.write(f"{i % 7},{(i * 13) % 11},{1 + 0.5 * (i % 7) - (i * 13) % 11 * 0.25}\n")
    subprocess.check_call([ravel, "produce", "--brokers", brokers, "--topic", TOPIC, "--input",
                           str(rows), "--wire-format", "binary", "--batch-rows", "100", "--quiet",
                           "-X", "sticky.partitioning.linger.ms=0"], stdout=subprocess.DEVNULL)
    (work / "ravel.toml").write_text(f"""
[http]
addr = "127.0.0.1:0"
[kafka]
group_id = "{GROUP}"
[state]
store = "kafka"
[demo]
enabled = false
[[streams]]
name = "r"
topic = "{TOPIC}"
features = 2
""" + (f'[kafka.options]\n"session.timeout.ms" = "{args.session_ms}"\n' if args.session_ms else ""))
    fmt = lambda t: "stuck" if t is None else f"{t:.1f}"
    run = 0
    a_, b_ = Replica(ravel, work, brokers, "a", run), Replica(ravel, work, brokers, "b", run)
    if settle([a_, b_], args.give_up) is None:
        sys.exit(f"the first two replicas did not settle: {work}")
    print("| try | kill: A ready (s) | kill: settled (s) | term: A ready (s) | term: B ready (s) | term: settled (s) |")
    print("|---|---|---|---|---|---|")
    stuck = []
    for t in range(1, args.tries + 1):
        run += 1
        a_.stop(signal.SIGKILL)
        a_ = Replica(ravel, work, brokers, "a", run)
        k_settled = settle([a_, b_], args.give_up)
        k_ready = a_.ready_at
        if k_settled is None:
            stuck.append((f"kill {t}", [a_, b_]))
        run += 1
        a_.stop(signal.SIGTERM)
        b_.stop(signal.SIGTERM)
        a_ = Replica(ravel, work, brokers, "a", run)
        time.sleep(args.gap)
        b_ = Replica(ravel, work, brokers, "b", run)
        t_settled = settle([a_, b_], args.give_up)
        if t_settled is None:
            stuck.append((f"term {t}", [a_, b_]))
        print(f"| {t} | {fmt(k_ready)} | {fmt(k_settled)} | {fmt(a_.ready_at)} | {fmt(b_.ready_at)} "
              f"| {fmt(t_settled)} |", flush=True)
    for what, rs in stuck:
        for r in rs:
            print(f"\n{what}: {r.log.name}: ready {r.ready_at}, live {live(r.base)}\n{r.tail()}")
    for r in (a_, b_):
        r.stop(signal.SIGTERM)
    broker.send_signal(signal.SIGTERM)
    broker.wait(timeout=30)
    if args.keep:
        print(f"\nlogs in {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
