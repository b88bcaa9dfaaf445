#!/usr/bin/env python3
"""The demo model's corpus as `tfm train` records: each document of prepare_corpus.py's train.txt and val.txt as
one {"text": ...} line ending in <|endoftext|>, so that tokenizing and concatenating them (run_clm's way) gives
the token stream models/demo/scripts/demo_data.py trains on.
    python3 bench/brown_jsonl.py CORPUS_DIR OUT_DIR [--copies N]
writes OUT_DIR/train.jsonl and OUT_DIR/val.jsonl. --copies N writes the training documents N times: one epoch of
that file is N epochs of the corpus whose blocks start at a different offset in each (the corpus' 1,579,047
tokens are 39 past a whole number of 512-token blocks, so copy c starts 39 c tokens into a block), which is
what train_model.py's random offset per epoch does for the committed demo model."""
import argparse
import json
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("corpus", type=Path)
parser.add_argument("out", type=Path)
parser.add_argument("--copies", type=int, default=1)
args = parser.parse_args()
args.out.mkdir(parents=True, exist_ok=True)
for split in ("train", "val"):
    documents = [d for d in (args.corpus / f"{split}.txt").read_text(encoding="utf-8").split("\n\n") if d.strip()]
    with open(args.out / f"{split}.jsonl", "w", encoding="utf-8") as f:
        for _ in range(args.copies if split == "train" else 1):
            for d in documents:
                f.write(json.dumps({"text": d + "<|endoftext|>"}, ensure_ascii=False) + "\n")
