#!/usr/bin/env bash
# Make the demo model in one go on the GPU machine: corpus -> text -> (tokenizer check) -> trained model.
# Usage: models/demo/scripts/train_on_gpu.sh TARBALL OUT_DIR [train_model.py options, e.g. --smoke]
# Writes six files, flat, into OUT_DIR: config.json, generation_config.json, model.safetensors (copy these
# into models/demo/), reference.json (Transformers' greedy outputs and the validation perplexity),
# train_log.txt (training progress) and run_log.txt (everything printed).
set -euo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,6p' "$0" >&2
    exit 2
fi
tarball=$1
out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
{
    "$python" "$here/prepare_corpus.py" "$tarball" "$work/data"
    # The committed tokenizer was trained on this text; retraining it must give the same file, which
    # shows the corpus text here is the text the tokenizer was made from.
    "$python" "$here/train_tokenizer.py" "$work/data" "$work/tokenizer"
    if cmp -s "$work/tokenizer/tokenizer.json" "$here/../tokenizer.json"; then
        echo "tokenizer check: retrained tokenizer.json is identical to the committed one"
    else
        echo "tokenizer check: WARNING: retrained tokenizer.json differs from the committed one"
    fi
    "$python" "$here/train_model.py" "$work/data" "$work/result" "$@"
    cp "$work/result/model/config.json" "$work/result/model/generation_config.json" \
        "$work/result/model/model.safetensors" "$work/result/reference.json" "$work/result/train_log.txt" "$out/"
    ls -l "$out"
} 2>&1 | tee "$out/run_log.txt"
