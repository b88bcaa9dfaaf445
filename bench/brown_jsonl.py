#!/usr/bin/env python3
"""The demo model's corpus as `tfm train` records: each document of prepare_corpus.py's train.txt and val.txt as
one {"text": ...} line ending in <|endoftext|>, so that tokenizing and concatenating them (run_clm's way) gives
the token stream models/demo/scripts/demo_data.py trains on.
    python3 bench/brown_jsonl.py CORPUS_DIR OUT_DIR      (writes OUT_DIR/train.jsonl and OUT_DIR/val.jsonl)"""
import json
import sys
from pathlib import Path

corpus, out = Path(sys.argv[1]), Path(sys.argv[2])
out.mkdir(parents=True, exist_ok=True)
for split in ("train", "val"):
    documents = [d for d in (corpus / f"{split}.txt").read_text(encoding="utf-8").split("\n\n") if d.strip()]
    with open(out / f"{split}.jsonl", "w", encoding="utf-8") as f:
        for d in documents:
            f.write(json.dumps({"text": d + "<|endoftext|>"}, ensure_ascii=False) + "\n")
