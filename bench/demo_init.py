#!/usr/bin/env python3
"""The demo model's starting point for `tfm train`: models/demo/config.json initialised as Transformers initialises
a new Qwen3ForCausalLM (normal(0, initializer_range) linears and embedding, norms at 1) under the seed
models/demo/scripts/train_model.py uses, so both trainers start from the same weights; saved in float32 (tfm keeps
float32 masters) with the demo's tokenizer files. Needs torch and transformers (the GPU machine).
    python3 bench/demo_init.py OUT_DIR [--seed 0]"""
import argparse
import shutil
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

DEMO = Path(__file__).resolve().parent.parent / "models" / "demo"

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()
config = Qwen3Config.from_pretrained(DEMO)
config.dtype = "float32"
torch.manual_seed(args.seed)
Qwen3ForCausalLM(config).save_pretrained(args.out)
for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
    shutil.copy(DEMO / name, Path(args.out) / name)
