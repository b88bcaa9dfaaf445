"""Writes progress_reference.json: tqdm's own rendering of progress lines, as huggingface_hub draws downloads
(unit="B", unit_scale=True) and as Transformers counts the weights it loads (tqdm's defaults, unit="it"), for
test_hub to compare tfm's progress bar with.

Run from the repository root: python tests/hub/make_progress_reference.py
"""

import json
import os

import tqdm
from tqdm import tqdm as tqdm_class

# (desc, n, total, elapsed seconds, initial, ncols); ncols 0 stands for "no terminal width" (tqdm's None).
CASES = [
    ("model.safetensors", 0, 100, 0.0, 0, 80),
    ("model.safetensors", 1234567, 2700000000, 10.5, 0, 80),
    ("model.safetensors", 1234567, 2700000000, 10.5, 0, 0),
    ("model-00001-of-00004.safetensors", 3999999999, 3999999999, 95.25, 0, 120),
    ("config.json", 663, 663, 0.01, 0, 100),
    ("config.json", 663, 663, 0.01, 0, 0),
    ("tokenizer.json", 500000, 11422654, 0.37, 0, 100),
    ("tokenizer.json", 5, 11422654, 7.0, 0, 100),
    ("shard", 150, 100, 2.0, 0, 80),
    ("shard", 999_500_000, None, 12.0, 0, 80),
    ("shard", 0, None, 0.0, 0, 80),
    ("shard", 0, 0, 0.0, 0, 80),
    ("resumed.safetensors", 6_000_000_000, 8_000_000_000, 3725.0, 5_000_000_000, 90),
    ("(…)t-name-that-is-quite-long-0001-of-0002.safetensors", 42, 1000, 1.0, 0, 100),
    ("x", 10**15, 2 * 10**15, 1.0, 0, 80),
]
# Counts of items: "Loading weights" as Transformers shows it.
ITEM_CASES = [
    ("Loading weights", 0, 311, 0.0, 0, 80),
    ("Loading weights", 140, 311, 1.2, 0, 80),
    ("Loading weights", 311, 311, 2.7, 0, 100),
    ("Loading weights", 3, 399, 5.0, 0, 0),
    ("Loading weights", 5, None, 12.5, 0, 80),
]


def main():
    cases = []
    for desc, n, total, elapsed, initial, ncols in CASES:
        line = tqdm_class.format_meter(n, total, elapsed, ncols=ncols or None, prefix=desc, unit="B",
                                       unit_scale=True, initial=initial)
        cases.append({"desc": desc, "n": n, "total": total, "elapsed": elapsed, "initial": initial,
                      "ncols": ncols, "unit": "bytes", "line": line})
    for desc, n, total, elapsed, initial, ncols in ITEM_CASES:
        line = tqdm_class.format_meter(n, total, elapsed, ncols=ncols or None, prefix=desc, initial=initial)
        cases.append({"desc": desc, "n": n, "total": total, "elapsed": elapsed, "initial": initial,
                      "ncols": ncols, "unit": "items", "line": line})
    path = os.path.join(os.path.dirname(__file__), "progress_reference.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"tqdm": tqdm.__version__, "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
