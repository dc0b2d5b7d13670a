#!/usr/bin/env python3
"""Where the CPU of a service ingest benchmark goes: bench_all's ingest case (same messages,
same broker, same `serve_once`), with the CPU seconds of every thread of `ravel serve` (grouped
by thread name), of the broker process, of this script (the HTTP poller that detects the last
row, and the sampler) and of the bare rdkafka consumer reading the same topic, per round.

    python3 scripts/ingest_cpu_split.py --case json100 --rounds 3

The per-thread figures come from /proc/<pid>/task/*/stat, sampled every 20 ms while the
service runs (the last sample is at most 20 ms before the last row was seen). Threads that
end between samples are counted as the whole process's CPU minus that of the threads seen.
Linux only.
"""

import argparse
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_all as B  # noqa: E402
from bench_freshness import Procs, cpu_seconds, start_broker  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = {"binary100": ("binary", 100, 100, 5_000), "json100": ("json", 100, 100, 1_500),
         "binary1000": ("binary", 1000, 10, 5_000), "json1000": ("json", 1000, 10, 1_500)}


def threads_cpu(pid):
    """{thread id: (name with digits as '*', CPU seconds)} of a process."""
    out = {}
    tck = os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                text = f.read()
        except FileNotFoundError:
            continue
        name = re.sub(r"\d+", "*", text[text.index("(") + 1:text.rindex(")")])
        fields = text.rsplit(")", 1)[1].split()
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / tck)
    return out


class Sampler(threading.Thread):
    """The CPU of each thread of the `ravel serve` child of this process, as last seen alive
    (threads that end while the process stops keep their last figure)."""

    def __init__(self, ravel):
        super().__init__(daemon=True)
        self.ravel, self.seen, self.stop = ravel, {}, threading.Event()

    @property
    def last(self):
        out = {}
        for name, cpu in self.seen.values():
            out[name] = out.get(name, 0.0) + cpu
        return out

    def serve_pid(self):
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if ppid == os.getpid() and argv[0] == self.ravel.encode() and argv[1:2] == [b"serve"]:
                return int(pid)
        return None

    def run(self):
        pid = None
        while not self.stop.is_set():
            pid = pid or self.serve_pid()
            if pid:
                self.seen.update(threads_cpu(pid))
            time.sleep(0.02)


def own_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="json100", choices=sorted(CASES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ravel", default=os.path.join(ROOT, "target", "release", "ravel"))
    ap.add_argument("--bare", help="the bare_consumer example (by default beside --ravel)")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "ravel-cpu-split"))
    args = ap.parse_args()
    args.ravel = os.path.abspath(args.ravel)
    bare = args.bare or os.path.join(os.path.dirname(args.ravel), "examples", "bare_consumer")
    fmt, p, per, count = CASES[args.case]
    total = per * count
    os.makedirs(args.dir, exist_ok=True)
    workdir = tempfile.mkdtemp(dir=args.dir)
    procs = Procs()
    rows = []
    with open(os.path.join(workdir, "log"), "a") as logf:
        try:
            broker, bootstrap = start_broker(procs, args.ravel, ["bench.tput:128", "bench.tput.dlq:1"], logf)
            B.fill(bootstrap, "bench.tput", 128, B.messages(p, per, fmt), count)
            for k in range(args.rounds):
                sampler = Sampler(args.ravel)
                sampler.start()
                b0, o0 = cpu_seconds(broker), own_cpu()
                _, rate, cpu = B.serve_once(args.ravel, bootstrap, p, total, workdir, logf, f"s{k}")
                b1, o1 = cpu_seconds(broker), own_cpu()
                sampler.stop.set()
                sampler.join()
                c0 = children_cpu()
                t, out = B.timed([bare, "--brokers", bootstrap, "--topic", "bench.tput", "--messages", str(count)])
                c1, b2 = children_cpu(), cpu_seconds(broker)
                rows.append({"rate": rate, "serve": cpu, "threads": sampler.last, "broker": b1 - b0,
                             "script": o1 - o0, "bare": c1 - c0, "bare_broker": b2 - b1,
                             "bare_rate": total / json.loads(out)["seconds"]})
        finally:
            procs.stop_all()
    names = sorted({n for r in rows for n in r["threads"]}, key=lambda n: -statistics.median(
        r["threads"].get(n, 0.0) for r in rows))
    med = lambda key: statistics.median(r[key] for r in rows)  # noqa: E731
    print(f"{args.case}: {total} rows, {args.rounds} rounds, medians; load average "
          f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs\n")
    print("| process / thread | CPU s |\n|---|---|")
    print(f"| ravel serve, first to last {med('rate'):,.0f} rows/s: whole process | {med('serve'):.3f} |")
    for n in names:
        v = statistics.median(r["threads"].get(n, 0.0) for r in rows)
        if v >= 0.005:
            print(f"| serve thread `{n}` | {v:.3f} |")
    unseen = statistics.median(r["serve"] - sum(r["threads"].values()) for r in rows)
    print(f"| serve threads that ended unseen: whole process minus the threads above | {unseen:.3f} |")
    print(f"| broker process (`ravel broker`) while serve ran | {med('broker'):.3f} |")
    print(f"| this script (HTTP poller every 5 ms + sampler) while serve ran | {med('script'):.3f} |")
    print(f"| bare consumer, first to last {med('bare_rate'):,.0f} rows/s: whole process | {med('bare'):.3f} |")
    print(f"| broker process while the bare consumer ran | {med('bare_broker'):.3f} |")


if __name__ == "__main__":
    main()
