#!/usr/bin/env python3
"""Runs the workspace's tests, one `cargo test` per test binary, on several lanes at once.

scripts/test calls this after `cargo test --no-run` has built every test binary. Most of the
suite's time is waiting: for a broker to start, a group to settle, a service to restart. Cargo
runs its test binaries one after another, so on a 2-core machine the cores idle through those
waits. Here each binary is its own `cargo test --test NAME` (the library's and examples' unit
tests and the doctests are two more, the Python package's suite, scripts/test_python, one
more), run `TEST_LANES` at a time (default 3), the
slowest first so that the lanes end together. Every run is workspace-level, as the build
was, so nothing is rebuilt.

Each binary's output goes to target/test-logs/NAME.log. As a binary ends its result line is
printed, with its ignored tests and their reasons; a failed binary's whole log is printed at
once. At the end: the per-binary timing table of docs/contributing.md ("Where CI's time
goes"), slowest first, and the exit status 1 when any binary failed.

    cargo test --no-run --features ravel-lm/linfa
    scripts/test_lanes.py --features ravel-lm/linfa   # everything, as scripts/test runs it
    TEST_LANES=1 scripts/test_lanes.py   # one binary at a time, as plain `cargo test` does
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

# Seconds each binary took in a recent run (docs/contributing.md's table): the order in which
# they start. A binary missing here is taken as quick; the figures need only be roughly right.
EXPECTED = {
    "declarations": 50, "scale_out": 55, "schema_registry": 53, "interop": 48, "console": 47, "features_asy": 40,
    "drift": 39, "secured_clients": 34, "features_os": 31, "ownership": 24, "processes": 21,
    "deploy": 18, "unit tests": 18, "quality": 13, "devloop": 13, "scoring": 10,
    "windows": 17, "dead_letters": 9, "openapi": 9, "dead_letter_burst": 8, "reference_sklearn": 8,
    "doctests": 8, "python": 150, "http_server": 7, "stream_cv": 6, "extraction_bounds": 5, "check": 5,
}

# The features the build was made with (`cargo test --no-run --features ...`): every run here
# passes the same, or cargo would build again with another feature set.
# (Given as `--features LIST`: a `RAVEL_` variable would reach the services the tests start,
# which refuse any they do not know as a config key.)
FEATURES = set()
if "--features" in sys.argv[1:-1]:
    FEATURES = {f for f in sys.argv[sys.argv.index("--features") + 1].split(",") if f}
FEATURE_ARGS = ["--features", ",".join(sorted(FEATURES))] if FEATURES else []
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGS = os.path.join(ROOT, "target", "test-logs")
RESULT = re.compile(
    r"test result: (\w+)\. (\d+) passed; (\d+) failed; (\d+) ignored.*finished in ([\d.]+)s"
)


def jobs():
    """(name, cargo test arguments) for every test binary of the default members."""
    meta = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--no-deps", "--format-version", "1"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
    )
    tests, units = set(), set()
    for package in meta["packages"]:
        for target in package["targets"]:
            # Targets behind an optional feature (ravel-core's linfa test and example) run when
            # the build has it (scripts/test builds with ravel-lm/linfa).
            required = {f"{package['name']}/{f}" for f in target.get("required-features", [])}
            if not target.get("test") or not required <= FEATURES:
                continue
            kind = target["kind"][0]
            if kind == "test":
                tests.add(target["name"])
            elif kind == "lib":
                units.add(("--lib",))
            elif kind in ("bin", "example", "bench"):
                units.add((f"--{kind}", target["name"]))
    out = [(name, ["--test", name]) for name in sorted(tests)]
    # The libraries', binaries' and test-enabled examples' own tests: exactly what plain
    # `cargo test` runs besides the test binaries (examples without `test = true` are only
    # built, by the `--no-run` before this).
    out.append(("unit tests", [a for unit in sorted(units) for a in unit]))
    out.append(("doctests", ["--doc"]))
    # The Python package's build and pytest suite (scripts/test_python), one lane like the
    # others: it reads target/debug/ravel, which the test build made.
    out.append(("python", None))
    return sorted(out, key=lambda j: -EXPECTED.get(j[0], 1))


def run(name, args, lock, results):
    log = os.path.join(LOGS, name.replace(" ", "_") + ".log")
    start = time.monotonic()
    with open(log, "w") as f:
        command = (
            [os.path.join(ROOT, "scripts", "test_python")]
            if args is None
            else ["cargo", "test", *FEATURE_ARGS, *args]
        )
        code = subprocess.run(command, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - start
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    counts = [0, 0, 0]
    for m in RESULT.finditer(text):
        for i in range(3):
            counts[i] += int(m.group(2 + i))
    ignored = [line.strip() for line in text.splitlines() if re.search(r"\.\.\. ignored", line)]
    with lock:
        results.append((name, counts, wall, code))
        status = "ok" if code == 0 else f"FAILED (exit {code})"
        print(
            f"{status:>8}  {name}: {counts[0]} passed, {counts[1]} failed, "
            f"{counts[2]} ignored, {wall:.1f} s",
            flush=True,
        )
        for line in ignored:
            print(f"          {line}", flush=True)
        if code != 0:
            print(f"---- {log} ----\n{text}\n---- end of {name} ----", flush=True)


def main():
    lanes = max(1, int(os.environ.get("TEST_LANES", "3")))
    os.makedirs(LOGS, exist_ok=True)
    queue = jobs()
    print(f"{len(queue)} test binaries on {lanes} lanes; logs in {LOGS}", flush=True)
    lock, results = threading.Lock(), []
    started = time.monotonic()

    def lane():
        while True:
            with lock:
                if not queue:
                    return
                name, args = queue.pop(0)
            run(name, args, lock, results)

    threads = [threading.Thread(target=lane) for _ in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started

    total = sum(r[2] for r in results)
    print("\n| test binary | tests | seconds | share |")
    print("|---|---:|---:|---:|")
    for name, counts, secs, _ in sorted(results, key=lambda r: -r[2]):
        print(f"| `{name}` | {counts[0] + counts[1]} | {secs:.1f} | {100 * secs / total:.0f} % |")
    ran = sum(r[1][0] + r[1][1] for r in results)
    print(f"| **all {len(results)} binaries** | {ran} | {total:.0f} | |")
    print(f"\n{wall:.0f} s of wall time on {lanes} lanes for {total:.0f} s of binaries")
    failed = [r[0] for r in results if r[3] != 0]
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
