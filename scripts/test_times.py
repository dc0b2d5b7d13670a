#!/usr/bin/env python3
"""Per-binary wall times of a `cargo test` run, slowest first, as the Markdown table of
docs/contributing.md ("Where CI's time goes").

    scripts/test 2>&1 | tee target/test.log
    scripts/test_times.py target/test.log

Reads the lines cargo prints for each test binary ("Running tests/x.rs (...)", "Doc-tests
ravel_core") and the harness's "test result: ... finished in 12.34s" after it.
"""

import re
import sys


def times(lines):
    """(binary, tests, seconds) for each binary of the log, in run order."""
    out, current = [], None
    for line in lines:
        m = re.search(r"^\s*Running (\S+)", line)
        if m:
            current = m.group(1)
            continue
        m = re.search(r"^\s*Doc-tests (\S+)", line)
        if m:
            current = f"doctests {m.group(1)}"
            continue
        m = re.search(
            r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored.*finished in ([\d.]+)s",
            line,
        )
        if m and current:
            ran = int(m.group(1)) + int(m.group(2))
            out.append((current, ran, float(m.group(4))))
            current = None
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/test_times.py LOG (the output of scripts/test)")
    with open(sys.argv[1], encoding="utf-8", errors="replace") as f:
        rows = times(f)
    if not rows:
        sys.exit(f"no test results in {sys.argv[1]}: is it the output of scripts/test?")
    total = sum(s for _, _, s in rows)
    print("| test binary | tests | seconds | share |")
    print("|---|---:|---:|---:|")
    for name, ran, secs in sorted(rows, key=lambda r: -r[2]):
        if secs >= 1.0:
            print(f"| `{name}` | {ran} | {secs:.1f} | {100 * secs / total:.0f} % |")
    quick = [r for r in rows if r[2] < 1.0]
    if quick:
        print(f"| {len(quick)} others, each under 1 s | {sum(r[1] for r in quick)} | "
              f"{sum(r[2] for r in quick):.1f} | |")
    print(f"| **all {len(rows)} binaries** | {sum(r[1] for r in rows)} | {total:.0f} | |")


if __name__ == "__main__":
    main()
