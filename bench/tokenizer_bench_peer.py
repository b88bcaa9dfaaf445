#!/usr/bin/env python3
"""The Rust tokenizers library (through its Python package) on the same lines as bench/tokenizer_bench.cpp,
single thread: load time of tokenizer.json and encode throughput; and, where transformers is installed, the
load time of AutoTokenizer.from_pretrained (the layer tfm's AutoTokenizer also applies).
    RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false python3 bench/tokenizer_bench_peer.py --model DIR --text FILE
"""
import argparse
import os
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Tokenizer  # noqa: E402  (after the thread settings)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--text", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with open(args.text, "rb") as f:
        lines = [line.decode("utf-8", errors="replace") for line in f.read().split(b"\n") if line]
    size = sum(len(line.encode("utf-8")) for line in lines)
    path = os.path.join(args.model, "tokenizer.json")
    load = min(timed(lambda: Tokenizer.from_file(path))[0] for _ in range(3))
    tok = Tokenizer.from_file(path)
    best, tokens = None, 0
    for _ in range(args.repeat):
        elapsed, tokens = timed(lambda: sum(len(tok.encode(line, add_special_tokens=False).ids) for line in lines))
        best = elapsed if best is None else min(best, elapsed)
    print(f"tokenizers (Rust) {args.model}: load {load * 1e3:.1f} ms, {len(lines)} lines, {size / 1e6:.2f} MB, "
          f"{tokens} tokens, encode {best:.3f} s = {size / 1e6 / best:.2f} MB/s, {tokens / best:.0f} tokens/s")
    try:
        from transformers import AutoTokenizer
    except ImportError:
        return
    load = min(timed(lambda: AutoTokenizer.from_pretrained(args.model))[0] for _ in range(3))
    print(f"transformers AutoTokenizer {args.model}: load {load * 1e3:.1f} ms")


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


if __name__ == "__main__":
    main()
