#!/usr/bin/env python3
"""The Transformers peer of `tfm bench throughput`: the same number of random prompts of the same length, each
generating exactly --output-len tokens greedily (no EOS), through Transformers' continuous batching
(`generate_batch`, paged sdpa) on the same model folder.

    python3 bench/generate_batch_peer.py --model DIR --num-prompts 256 --input-len 128 --output-len 256
Prints one JSON object: wall seconds of the generate_batch call (after a small warm-up call) and output tokens/s.
"""
import argparse
import json
import random
import time

import torch
from transformers import AutoModelForCausalLM
from transformers.generation import GenerationConfig


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--num-prompts", type=int, default=256)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=256)
    a = p.parse_args()
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=getattr(torch, a.dtype),
                                                 attn_implementation="paged|sdpa", device_map="cuda").eval()
    rng = random.Random(0)
    vocab = model.config.vocab_size
    prompts = [[rng.randrange(vocab) for _ in range(a.input_len)] for _ in range(a.num_prompts)]
    config = GenerationConfig(max_new_tokens=a.output_len, do_sample=False, eos_token_id=None,
                              pad_token_id=0)
    with torch.no_grad():
        model.generate_batch(inputs=prompts[:8], generation_config=config, progress_bar=False)
        torch.cuda.synchronize()
        start = time.perf_counter()
        outputs = model.generate_batch(inputs=prompts, generation_config=config, progress_bar=False)
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    generated = sum(len(o.generated_tokens) for o in outputs.values())
    print(json.dumps({"peer": "transformers generate_batch", "dtype": a.dtype, "num_prompts": a.num_prompts,
                      "input_len": a.input_len, "output_len": a.output_len, "generated": generated,
                      "seconds": seconds, "output_tokens_per_s": generated / seconds}))


if __name__ == "__main__":
    main()
