#!/usr/bin/env bash
# tfm's side of the generation benchmark: greedy generation from the same prompt ids as bench/generate_peer.py,
# the median of REPEAT runs (after a warm-up) of prompt tokens/s and decode tokens/s from `tfm generate --json`.
#   bench/generate_bench.sh TFM MODEL_DIR DEVICE DTYPE PROMPT_TOKENS NEW_TOKENS [REPEAT]
set -euo pipefail
tfm=$1 model=$2 device=$3 dtype=$4 prompt_tokens=$5 new_tokens=$6 repeat=${7:-3}
ids=$(python3 -c "import json,sys; c=json.load(open('$model/config.json')); print(','.join(str((i*7919+13)%min(c['vocab_size'],32000)) for i in range($prompt_tokens)))")
run() {
  "$tfm" generate --model "$model" --device "$device" --dtype "$dtype" --ids "$ids" --max-new-tokens "$new_tokens" \
    --json 2>/dev/null
}
run >/dev/null  # warm-up
for _ in $(seq "$repeat"); do run; done | python3 -c "
import json, statistics, sys
runs = [json.loads(l) for l in sys.stdin]
prefill = statistics.median(r['prefill_seconds'] for r in runs)
decode = statistics.median(r['decode_seconds'] for r in runs)
n = len(runs[0]['ids'])
print(json.dumps({'peer': 'tfm', 'device': '$device', 'dtype': '$dtype', 'prompt_tokens_per_s': $prompt_tokens / prefill,
                  'decode_tokens_per_s': (n - 1) / decode, 'generated': n}))"
