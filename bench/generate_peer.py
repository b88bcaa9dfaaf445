#!/usr/bin/env python3
"""The Transformers peer of `tfm generate --json`: greedy generation from the same prompt ids on the same model
folder, timed the same way (prefill = the first step, decode = every later step).

    python3 bench/generate_peer.py --model DIR --device cuda --dtype float32 --prompt-tokens 128 --new-tokens 128
        [--batch-size B]
Prints one JSON object: prompt tokens/s and decode tokens/s, the median of --repeat runs after a warm-up.
--compile takes Transformers' fastest path instead: a static cache, with which generate() compiles the forward
itself (torch.compile, "reduce-overhead": CUDA graphs); the compile time goes into the warm-up, reported apart.
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AutoModelForCausalLM


def prompt_ids(n, vocab, row=0):
    return [(i * 7919 + 13 + row * 104729) % min(vocab, 32000) for i in range(n)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--attn", default="sdpa")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--compile", action="store_true")
    a = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=getattr(torch, a.dtype), attn_implementation=a.attn)
    model = model.to(a.device).eval()
    if a.compile:
        model.generation_config.cache_implementation = "static"
    ids = torch.tensor([prompt_ids(a.prompt_tokens, model.config.vocab_size, row) for row in range(a.batch_size)],
                       device=a.device)

    def timed(n):
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
        if a.device.startswith("cuda"):
            torch.cuda.synchronize()
        return time.perf_counter() - start

    warm_up = timed(a.new_tokens)
    prefill = statistics.median(timed(1) for _ in range(a.repeat))
    total = statistics.median(timed(a.new_tokens) for _ in range(a.repeat))
    print(json.dumps({"peer": "transformers" + (" static+compile" if a.compile else ""), "device": a.device,
                      "dtype": a.dtype, "attn": a.attn, "batch_size": a.batch_size, "prompt_tokens": a.prompt_tokens,
                      "new_tokens": a.new_tokens, "warm_up_seconds": warm_up,
                      "prompt_tokens_per_s": a.batch_size * a.prompt_tokens / prefill,
                      "decode_tokens_per_s": a.batch_size * (a.new_tokens - 1) / (total - prefill)}))


if __name__ == "__main__":
    main()
