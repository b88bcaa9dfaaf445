#!/usr/bin/env bash
# Make the demo model in one go on the GPU machine: corpus -> text -> (tokenizer check) -> trained model.
# Usage: models/demo/scripts/train_on_gpu.sh TARBALL OUT_DIR [train_model.py options, e.g. --smoke]
# Writes OUT_DIR/model/ (the model folder to copy into models/demo/), OUT_DIR/reference.json,
# OUT_DIR/train_log.txt and OUT_DIR/run_log.txt (everything printed).
set -euo pipefail
if [ $# -lt 2 ]; then
    sed -n '2,5p' "$0" >&2
    exit 2
fi
tarball=$1
out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$out"
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
{
    "$python" "$here/prepare_corpus.py" "$tarball" "$data"
    # The committed tokenizer was trained on this text; retraining it must give the same file, which
    # shows the corpus text here is the text the tokenizer was made from.
    "$python" "$here/train_tokenizer.py" "$data" "$data/tokenizer"
    if cmp -s "$data/tokenizer/tokenizer.json" "$here/../tokenizer.json"; then
        echo "tokenizer check: retrained tokenizer.json is identical to the committed one"
    else
        echo "tokenizer check: WARNING: retrained tokenizer.json differs from the committed one"
    fi
    "$python" "$here/train_model.py" "$data" "$out" "$@"
} 2>&1 | tee "$out/run_log.txt"
