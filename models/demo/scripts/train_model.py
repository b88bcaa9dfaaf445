#!/usr/bin/env python3
"""Train tfm's demo model (a small Qwen3) on prepare_corpus.py's Brown Corpus text, save it as the Hub
saves models, and record Transformers' greedy outputs for tfm to match.

Usage: train_model.py DATA_DIR OUT_DIR [--minutes 5] [--smoke]

DATA_DIR holds train.txt and val.txt; the tokenizer is the one committed beside this folder
(models/demo/tokenizer.json). Writes
  OUT_DIR/model/          config.json, generation_config.json, model.safetensors (bf16), tokenizer files
  OUT_DIR/reference.json  validation perplexity of the saved model; greedy generations on the CPU in float32
The corpus is small (1.6M tokens), so the epoch count that generalises best is not known in advance:
the script trains one run per --epochs value (each from the same initialisation, with its own warm-up
and cosine schedule, sized down if the --minutes budget runs short), evaluates every half epoch, and
keeps the weights with the lowest validation loss over all runs.
"""

import argparse
import json
import math
import shutil
import time
from pathlib import Path

import numpy as np
import torch
from demo_data import batches_per_epoch, blocks, epoch_batches, read_documents, token_stream
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

DEMO_DIR = Path(__file__).resolve().parent.parent
TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "chat_template.jinja"]
MAX_FOLDER_BYTES = 16_000_000
ENDOFTEXT_ID = 0  # <|endoftext|>: document separator, eos and pad
IM_END_ID = 2  # <|im_end|>: end of a chat turn, also stops generation
PROMPTS = ["The old man said", "In the morning", "The city council", "She looked at him and"]
NEW_TOKENS = 40


def model_config(args, vocab_size):
    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=args.hidden_size,
        intermediate_size=args.intermediate_size,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=args.block_size,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=ENDOFTEXT_ID,
        pad_token_id=ENDOFTEXT_ID,
    )


def generation_config():
    return GenerationConfig(
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=[ENDOFTEXT_ID, IM_END_ID],
        pad_token_id=ENDOFTEXT_ID,
        do_sample=False,
    )


def learning_rate(step, total_steps, args):
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    progress = min(1.0, (step - args.warmup_steps) / max(1, total_steps - args.warmup_steps))
    return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress)))


def make_optimizer(model, args):
    """AdamW; weight decay on matrices only (not on norms)."""
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": matrices, "weight_decay": args.weight_decay}, {"params": vectors, "weight_decay": 0.0}]
    fused = next(model.parameters()).is_cuda
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=fused)


def autocast(device, bf16=True):
    """bf16 autocast on GPUs (training precision); float32 elsewhere or when bf16 is off."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16 and device.type == "cuda")


@torch.no_grad()
def validation_loss(model, val_blocks, batch_size, device, bf16=True):
    """Mean next-token loss over all validation blocks (each block predicts block_size - 1 tokens)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(val_blocks), batch_size):
        batch = torch.from_numpy(val_blocks[start : start + batch_size]).to(device)
        with autocast(device, bf16):
            loss = model(input_ids=batch, labels=batch).loss
        predicted = batch.shape[0] * (batch.shape[1] - 1)
        total += loss.float().item() * predicted
        count += predicted
    model.train(was_training)
    return total / count


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(model, epochs, seconds, train_stream, val_blocks, args, device, log):
    """One run of `epochs` epochs (fewer if `seconds` run out). Returns (best validation loss, the
    state dict on the CPU that reached it)."""
    rng = np.random.default_rng(args.seed)
    per_epoch = batches_per_epoch(train_stream, args.block_size, args.batch_size)
    planned = epochs * per_epoch
    optimizer = make_optimizer(model, args)
    eval_every = max(1, per_epoch // args.evals_per_epoch)
    log(f"run of {epochs} epochs: {per_epoch} steps per epoch of {args.batch_size}x{args.block_size} tokens")

    best_loss, best_state, step = float("inf"), None, 0
    start = time.monotonic()
    model.train()
    while step < planned:
        for batch in epoch_batches(train_stream, args.block_size, args.batch_size, rng):
            if step == args.timing_steps:
                # Size the schedule to the time budget once the step time is known (first steps warm up kernels).
                synchronize(device)
                seconds_per_step = (time.monotonic() - start) / step
                affordable = int(seconds / seconds_per_step)
                planned = max(step + 1, min(planned, affordable))
                log(f"{seconds_per_step * 1000:.1f} ms per step: training {planned} steps")
            if step >= planned:
                break
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, planned, args)
            batch = torch.from_numpy(batch).to(device, non_blocking=True)
            with autocast(device):
                loss = model(input_ids=batch, labels=batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step % eval_every == 0 or step == planned:
                val = validation_loss(model, val_blocks, args.batch_size, device)
                mark = ""
                if val < best_loss:
                    best_loss, mark = val, " (best)"
                    best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
                lr = learning_rate(step - 1, planned, args)
                log(
                    f"  step {step}/{planned} epoch {step / per_epoch:.2f} lr {lr:.2e} "
                    f"train loss {loss.item():.4f} val loss {val:.4f} ppl {math.exp(val):.2f}{mark} "
                    f"[{time.monotonic() - start:.0f} s]"
                )
    return best_loss, best_state


def folder_bytes(folder):
    return sum(f.stat().st_size for f in Path(folder).iterdir() if f.is_file())


def save(model, tokenizer_dir, model_dir):
    model.to(torch.bfloat16).save_pretrained(model_dir)
    generation_config().save_pretrained(model_dir)
    for name in TOKENIZER_FILES:
        shutil.copyfile(Path(tokenizer_dir) / name, Path(model_dir) / name)
    size = folder_bytes(model_dir)
    if size >= MAX_FOLDER_BYTES:
        raise SystemExit(f"{model_dir} is {size} bytes, over the {MAX_FOLDER_BYTES} allowed")
    return size


def saved_model_perplexity(model_dir, val_blocks, batch_size, device):
    """Validation perplexity of the saved bf16 weights, computed in float32."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device)
    return math.exp(validation_loss(model, val_blocks, batch_size, device, bf16=False))


@torch.no_grad()
def greedy(model, tokenizer, prompt):
    """(prompt ids, generated ids, per-step logits) of Transformers' greedy generation."""
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    out = model.generate(
        **inputs, max_new_tokens=NEW_TOKENS, do_sample=False, output_scores=True, return_dict_in_generate=True
    )
    prompt_ids = inputs["input_ids"][0].tolist()
    return prompt_ids, out.sequences[0, len(prompt_ids) :].tolist(), out.scores


def greedy_references(model_dir, device):
    """Greedy generations of the saved model with Transformers on the CPU in float32, and whether the
    same run on `device` (float32) gives the same tokens."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    other = None
    if device.type != "cpu":
        other = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(device).eval()
    references = []
    for prompt in PROMPTS:
        prompt_ids, generated, scores = greedy(model, tokenizer, prompt)
        # How far the chosen token's logit is ahead of the runner-up, at the closest step: a tiny margin
        # means a different but correct implementation may pick the other token.
        margins = [float(s[0].topk(2).values[0] - s[0].topk(2).values[1]) for s in scores]
        same_on_device = None if other is None else greedy(other, tokenizer, prompt)[1] == generated
        references.append(
            {
                "prompt": prompt,
                "input_ids": prompt_ids,
                "generated_ids": generated,
                "generated_text": tokenizer.decode(generated),
                "text": prompt + tokenizer.decode(generated),
                "min_top2_logit_margin": min(margins),
                f"same_ids_on_{device.type}_float32": same_on_device,
            }
        )
    return references


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", help="folder with train.txt and val.txt (prepare_corpus.py)")
    parser.add_argument("out_dir", help="folder for model/ and reference.json (created)")
    parser.add_argument("--tokenizer-dir", default=str(DEMO_DIR), help="folder with the tokenizer files")
    parser.add_argument("--minutes", type=float, default=5.0, help="time budget for the training steps")
    parser.add_argument("--epochs", default="4,8,16,32", help="comma-separated epoch counts, one run each")
    parser.add_argument("--block-size", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--evals-per-epoch", type=int, default=2)
    parser.add_argument("--timing-steps", type=int, default=20, help="steps timed to size the schedule")
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--intermediate-size", type=int, default=768)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--smoke", action="store_true", help="a few tiny steps on a slice of the data")
    args = parser.parse_args(argv)
    if args.smoke:
        args.epochs, args.block_size, args.batch_size = "1,2", 64, 4
        args.warmup_steps, args.timing_steps, args.evals_per_epoch = 2, 2, 2
    return args


def main(argv=None):
    args = parse_args(argv)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    log_file = open(out_dir / "train_log.txt", "w", encoding="utf-8")

    def log(message):
        print(message, flush=True)
        log_file.write(message + "\n")
        log_file.flush()

    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    name = f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else ""
    log(f"torch {torch.__version__}, device {device}{name}")

    tokenizer_file = Path(args.tokenizer_dir) / "tokenizer.json"
    train_docs = read_documents(Path(args.data_dir) / "train.txt")
    val_docs = read_documents(Path(args.data_dir) / "val.txt")
    if args.smoke:
        train_docs, val_docs = train_docs[:1], val_docs[:1]
    train_stream = token_stream(train_docs, tokenizer_file)
    val_stream = token_stream(val_docs, tokenizer_file)
    val_blocks = blocks(val_stream, args.block_size)
    log(f"tokens: train {len(train_stream)}, val {len(val_stream)} ({len(val_blocks)} blocks of {args.block_size})")

    config = model_config(args, vocab_size=len(AutoTokenizer.from_pretrained(args.tokenizer_dir)))
    torch.manual_seed(args.seed)
    model = Qwen3ForCausalLM(config)
    initial_state = {k: v.clone() for k, v in model.state_dict().items()}
    model.to(device)
    parameters = sum(p.numel() for p in model.parameters())  # tied embeddings are counted once
    tokenizer_bytes = sum((Path(args.tokenizer_dir) / n).stat().st_size for n in TOKENIZER_FILES)
    log(f"{parameters} parameters: {parameters * 2} bytes in bf16, {tokenizer_bytes} bytes of tokenizer files")
    if parameters * 2 + tokenizer_bytes >= MAX_FOLDER_BYTES:
        raise SystemExit(f"the model would not fit in {MAX_FOLDER_BYTES} bytes")

    best_val, best_state, best_epochs = float("inf"), None, None
    deadline = time.monotonic() + args.minutes * 60
    for epochs in sorted(int(e) for e in args.epochs.split(",")):
        seconds = deadline - time.monotonic()
        if seconds <= 0:
            log(f"no time left for the run of {epochs} epochs")
            break
        torch.manual_seed(args.seed)
        model.load_state_dict(initial_state)
        val, state = train(model, epochs, seconds, train_stream, val_blocks, args, device, log)
        log(f"run of {epochs} epochs: best validation loss {val:.4f}, perplexity {math.exp(val):.2f}")
        if val < best_val:
            best_val, best_state, best_epochs = val, state, epochs
    model.load_state_dict(best_state)
    log(
        f"kept the run of {best_epochs} epochs: validation loss {best_val:.4f}, "
        f"perplexity {math.exp(best_val):.2f} (training precision)"
    )

    model_dir = out_dir / "model"
    size = save(model, args.tokenizer_dir, model_dir)
    log(f"saved {model_dir}: {size} bytes")
    perplexity = saved_model_perplexity(model_dir, val_blocks, args.batch_size, device)
    log(f"validation perplexity of the saved bf16 weights (float32 compute): {perplexity:.3f}")

    references = greedy_references(model_dir, device)
    for ref in references:
        same = ref[f"same_ids_on_{device.type}_float32"]
        log(f"{ref['text']!r} (min top-2 margin {ref['min_top2_logit_margin']:.3f}; same on {device.type}: {same})")
    reference = {
        "model": "models/demo (Qwen3ForCausalLM)",
        "generation": f"greedy, max_new_tokens={NEW_TOKENS}, Transformers on the CPU, float32",
        "torch": torch.__version__,
        "validation_tokens": int(len(val_blocks) * (args.block_size - 1)),
        "validation_perplexity": perplexity,
        "parameters": parameters,
        "epochs": best_epochs,
        "references": references,
    }
    (out_dir / "reference.json").write_text(json.dumps(reference, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {out_dir / 'reference.json'}")


if __name__ == "__main__":
    main()
