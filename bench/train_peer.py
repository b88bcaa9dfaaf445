#!/usr/bin/env python3
"""Transformers' Trainer on the same records and arguments as a `tfm train` run, for its training throughput:
    python3 bench/train_peer.py MODEL_DIR TRAIN.jsonl BLOCK STEPS BATCH [--compile] [--lora R]
Records are tokenized and packed as run_clm.py packs them (tfm train's "text" records); the model is loaded in
float32 and trained with bf16=True (autocast, float32 weights: what tfm's --bf16 does with its float32 masters),
sdpa attention, AdamW, no checkpoints. Prints one JSON line: steps, tokens per step, seconds of the steps after
the first (the first holds the warm-up, and torch.compile's compilation), tokens/s, and the peak GPU memory in use
(nvidia-smi). --lora R trains a PEFT LoRA adapter of rank R (alpha 2R) on all linear layers instead."""
import json
import sys
import time

from peak_gpu_memory import PeakGpuMemory

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainerCallback, TrainingArguments

model_dir, data, block, steps, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
compile_ = "--compile" in sys.argv
lora_rank = int(sys.argv[sys.argv.index("--lora") + 1]) if "--lora" in sys.argv else 0
tokenizer = AutoTokenizer.from_pretrained(model_dir)
ids = []
for line in open(data, encoding="utf-8"):
    ids.extend(tokenizer(json.loads(line)["text"])["input_ids"])
blocks = [ids[i : i + block] for i in range(0, len(ids) - block + 1, block)]
dataset = [{"input_ids": torch.tensor(b), "labels": torch.tensor(b)} for b in blocks]


class StepTimes(TrainerCallback):
    def __init__(self):
        self.times = []

    def on_step_end(self, args, state, control, **kwargs):
        torch.cuda.synchronize()
        self.times.append(time.perf_counter())


model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
if lora_rank:
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(model, LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, target_modules="all-linear"))
args = TrainingArguments(output_dir="/tmp/train_peer", max_steps=steps, per_device_train_batch_size=batch,
                         learning_rate=1e-4, bf16=True, save_strategy="no", logging_steps=steps, report_to="none",
                         torch_compile=compile_, disable_tqdm=True)
times = StepTimes()
trainer = Trainer(model=model, args=args, train_dataset=dataset, callbacks=[times],
                  data_collator=lambda b: {k: torch.stack([x[k] for x in b]) for k in b[0]})
with PeakGpuMemory() as peak:
    trainer.train()
seconds = times.times[-1] - times.times[0]
tokens = batch * block
name = "transformers" + (" compiled" if compile_ else "") + (f" lora r={lora_rank}" if lora_rank else "")
print(json.dumps({"peer": name, "steps": steps - 1, "tokens_per_step": tokens, "seconds": seconds,
                  "tokens_per_second": tokens * (steps - 1) / seconds, "peak_gpu_mib": peak.mib}))
