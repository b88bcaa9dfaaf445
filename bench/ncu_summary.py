#!/usr/bin/env python3
"""Sums an ncu CSV of gpu__time_duration.sum (ncu --csv --metrics gpu__time_duration.sum ...) by kernel name:
how many launches, their device time in all and each, largest first; the kernels of a decode step profiled node
by node show which ones its time goes to.

usage: bench/ncu_summary.py NCU.csv [TOP]
"""
import collections
import csv
import sys

SCALE_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def main():
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    with open(path, newline="") as f:  # the program's own output and ncu's ==PROF== lines come first
        rows = [r for r in csv.reader(f) if len(r) > 5]
    first = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if first is None:
        sys.exit(f"{path}: no ncu CSV rows (is it ncu --csv output?)")
    header, rows = rows[first], rows[first + 1:]
    name, unit, value = (header.index(k) for k in ("Kernel Name", "Metric Unit", "Metric Value"))
    totals = collections.defaultdict(lambda: [0, 0.0])
    for r in rows:
        us = float(r[value].replace(",", "")) * SCALE_TO_US[r[unit]]
        entry = totals[r[name][:100]]
        entry[0] += 1
        entry[1] += us
    all_us = sum(t for _, t in totals.values())
    print(f"{len(rows)} kernels, {all_us:.1f} us of device time in all")
    for kernel, (n, us) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"{us:10.1f} us {100 * us / all_us:5.1f}% {n:6d} x {us / n:7.2f} us  {kernel}")


if __name__ == "__main__":
    main()
