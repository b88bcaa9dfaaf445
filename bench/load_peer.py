#!/usr/bin/env python3
"""The Transformers peer of bench/load_bench.cpp: from_pretrained(DIR, dtype=..., device_map=DEVICE), timed,
with the checkpoint in the page cache, and the host memory it took; and the floor, the time to copy the
checkpoint's bytes to the device from pinned host memory at the rate this machine reaches.

    python3 bench/load_peer.py --model DIR --device cuda --dtype bfloat16 [--repeat 3]
Prints one JSON object.
"""
import argparse
import gc
import glob
import json
import os
import statistics
import time

import torch
from transformers import AutoModelForCausalLM


def status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def warm_page_cache(model):
    total = 0
    for path in glob.glob(os.path.join(model, "*.safetensors")):
        with open(path, "rb") as f:
            while chunk := f.read(64 << 20):
                total += len(chunk)
    return total


def pinned_copy_bytes_per_s(device):
    """Host-to-device bandwidth from pinned memory: 1 GiB, best of five."""
    host = torch.empty(1 << 30, dtype=torch.uint8, pin_memory=True)
    host.fill_(1)
    dev = torch.empty_like(host, device=device)
    best = float("inf")
    for _ in range(5):
        torch.cuda.synchronize()
        start = time.perf_counter()
        dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return host.numel() / best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    checkpoint_bytes = warm_page_cache(a.model)
    torch.zeros(1, device=a.device)  # the runtime starts before the clock and the baseline
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM starts again from VmRSS
    baseline = status_bytes("VmRSS")
    seconds = []
    for _ in range(a.repeat):
        start = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(a.model, dtype=getattr(torch, a.dtype), device_map=a.device)
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
        del model
        gc.collect()
        torch.cuda.empty_cache()
    peak = status_bytes("VmHWM")
    out = {"peer": "transformers", "device": a.device, "dtype": a.dtype,
           "load_seconds": statistics.median(seconds), "checkpoint_bytes": checkpoint_bytes,
           "peak_rss_above_start_bytes": peak - baseline}
    if a.device.startswith("cuda"):
        rate = pinned_copy_bytes_per_s(a.device)
        out["pinned_copy_bytes_per_s"] = rate
        out["copy_floor_seconds"] = checkpoint_bytes / rate
    print(json.dumps(out))


if __name__ == "__main__":
    main()
