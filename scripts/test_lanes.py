#!/usr/bin/env python3
"""Runs the workspace's tests, a test binary (or a module of the suite) per process, on several
lanes at once.

scripts/test calls this after `cargo test --no-run` has built every test binary. Most of the
suite's time is waiting: for a broker to start, a group to settle, a service to restart. Cargo
runs its test binaries one after another, so on a 2-core machine the cores idle through those
waits. Here each test binary runs as a process of its own, and the service's one test binary
(tests/suite.rs: one module a file of tests/) once a module with that module's tests
(`--exact`), `TEST_LANES` at a time (default 3), the slowest first so that the lanes end
together. The binaries are run directly, as cargo would run them (from their package's
folder), not through `cargo test`: the lint steps (clippy, the docs) can then use cargo beside
the lanes without either waiting on the other's lock (scripts/test, `LINT_BESIDE_TESTS=1`). Only the
doctests go through cargo (`cargo test --doc`), last. The Python package's suite
(scripts/test_python: its own build, in its own target folder, then pytest) is one more job.

The binaries are those `cargo test --no-run --message-format json` names: its output in the
file given by `--binaries FILE` (scripts/test writes it as it builds), else asked of cargo here.

Each job's output goes to target/test-logs/NAME.log. As a job ends its result line is printed,
with its ignored tests and their reasons; a failed job's whole log is printed at once. At the
end: the per-job timing table of docs/contributing.md ("Where CI's time goes"), slowest first,
and the exit status 1 when any job failed.

    cargo test --no-run --features ravel-lm/linfa
    scripts/test_lanes.py --features ravel-lm/linfa   # everything, as scripts/test runs it
    TEST_LANES=1 scripts/test_lanes.py   # one job at a time
    scripts/test_lanes.py --features ravel-lm/linfa --only interop,layout   # those jobs only
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
    "windows": 17, "dead_letters": 9, "openapi": 9, "dead_letter_burst": 8, "reference_sklearn": 20,
    "doctests": 8, "http_server": 7, "stream_cv": 6, "nist": 6, "extraction_bounds": 5, "check": 5,
    "inference": 35, "python": 150,
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


def artifacts():
    """The test executables of the build: (package, kind, target name, executable, package
    folder) for every target built in the test profile."""
    if "--binaries" in sys.argv[1:-1]:
        with open(sys.argv[sys.argv.index("--binaries") + 1]) as f:
            lines = f.read().splitlines()
    else:
        lines = subprocess.run(
            ["cargo", "test", "--no-run", *FEATURE_ARGS, "--message-format", "json"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout.splitlines()
    out = []
    for line in lines:
        if not line.startswith("{"):
            continue
        m = json.loads(line)
        if m.get("reason") != "compiler-artifact" or not m.get("executable"):
            continue
        if not m["profile"]["test"]:
            continue
        package = m["package_id"].split("#")[-1].split("@")[0]
        folder = os.path.dirname(m["manifest_path"])
        out.append((package, m["target"]["kind"][0], m["target"]["name"], m["executable"], folder))
    return out


def suite_modules(executable, folder):
    """The modules of the suite binary (tests/suite.rs: one module a file), each with its
    tests: {module: [full test names]}."""
    listing = subprocess.run(
        [executable, "--list", "--format", "terse"],
        cwd=folder, check=True, capture_output=True, text=True,
    ).stdout
    modules = {}
    for line in listing.splitlines():
        if line.endswith(": test"):
            test = line[: -len(": test")]
            modules.setdefault(test.split("::")[0], []).append(test)
    return modules


def jobs():
    """(name, [(executable, arguments, folder)]) for every test binary of the default
    members (a module of the suite binary is a job of its own), the unit tests of the
    libraries, binaries and examples as one job, and the doctests (through cargo)."""
    out, units = [], []
    for package, kind, name, exe, folder in artifacts():
        if kind == "test" and name == "suite":
            for module, tests in suite_modules(exe, folder).items():
                out.append((module, [(exe, ["--exact", *tests], folder)]))
        elif kind == "test":
            out.append((name, [(exe, [], folder)]))
        else:
            # The libraries', binaries' and test-enabled examples' own tests: what plain
            # `cargo test` runs besides the test binaries.
            units.append((exe, [], folder))
    out.append(("unit tests", sorted(units)))
    out.append(("doctests", [("cargo", ["test", *FEATURE_ARGS, "--doc"], ROOT)]))
    # The Python package's build and pytest suite (scripts/test_python): it reads
    # target/debug/ravel, which the test build made.
    out.append(("python", [(os.path.join(ROOT, "scripts", "test_python"), [], ROOT)]))
    # A name two packages share (a ravel-core test binary and a suite module) is told apart.
    seen = {}
    for name, _ in out:
        seen[name] = seen.get(name, 0) + 1
    out = [
        (f"{name}@{os.path.basename(runs[0][2])}" if seen[name] > 1 else name, runs)
        for name, runs in out
    ]
    # The doctests last: through cargo, they wait for a lint step's lock.
    return sorted(out, key=lambda j: (j[0] == "doctests", -EXPECTED.get(j[0], 1)))


def run(name, runs, lock, results):
    log = os.path.join(LOGS, name.replace(" ", "_").replace("@", "_") + ".log")
    start = time.monotonic()
    code = 0
    with open(log, "w") as f:
        for exe, args, folder in runs:
            f.write(f"     Running {os.path.relpath(exe, ROOT) if exe != 'cargo' else 'cargo'} {' '.join(args[:1])}\n")
            f.flush()
            rc = subprocess.run([exe, *args], cwd=folder, stdout=f, stderr=subprocess.STDOUT).returncode
            code = code or rc
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
    if "--only" in sys.argv[1:-1]:
        only = set(sys.argv[sys.argv.index("--only") + 1].split(","))
        queue = [j for j in queue if j[0] in only]
    print(f"{len(queue)} jobs (test binaries and the suite's modules) on {lanes} lanes; logs in {LOGS}", flush=True)
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
    print("\n| job | tests | seconds | share |")
    print("|---|---:|---:|---:|")
    for name, counts, secs, _ in sorted(results, key=lambda r: -r[2]):
        print(f"| `{name}` | {counts[0] + counts[1]} | {secs:.1f} | {100 * secs / total:.0f} % |")
    ran = sum(r[1][0] + r[1][1] for r in results)
    print(f"| **all {len(results)} jobs** | {ran} | {total:.0f} | |")
    print(f"\n{wall:.0f} s of wall time on {lanes} lanes for {total:.0f} s of jobs")
    failed = [r[0] for r in results if r[3] != 0]
    if failed:
        print(f"FAILED: {', '.join(failed)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
