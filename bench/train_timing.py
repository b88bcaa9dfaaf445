#!/usr/bin/env python3
"""Times a `tfm train` run by its log lines (run it with --logging_steps 1): the seconds from the first step's
line to the last's, so that loading and the first step's warm-up are left out as in bench/train_peer.py.
    python3 bench/train_timing.py TOKENS_PER_STEP -- tfm train ... --logging_steps 1
Prints the run's own lines, then one JSON line: steps, seconds, tokens/s, the last logged loss, and the peak GPU
memory in use during the run (nvidia-smi)."""
import json
import subprocess
import sys
import time

from peak_gpu_memory import PeakGpuMemory

tokens_per_step = int(sys.argv[1])
command = sys.argv[sys.argv.index("--") + 1 :]
times, last = [], None
with PeakGpuMemory() as peak, subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as run:
    for line in run.stdout:
        now = time.perf_counter()
        print(line, end="", flush=True)
        entry = json.loads(line) if line.startswith("{") else {}
        if "loss" in entry:
            times.append(now)
            last = entry
if run.returncode != 0 or len(times) < 2:
    sys.exit(f"tfm train failed (exit {run.returncode}) or logged fewer than two steps")
seconds = times[-1] - times[0]
print(json.dumps({"peer": "tfm", "steps": len(times) - 1, "tokens_per_step": tokens_per_step, "seconds": seconds,
                  "tokens_per_second": tokens_per_step * (len(times) - 1) / seconds, "last_loss": last["loss"], "peak_gpu_mib": peak.mib}))
