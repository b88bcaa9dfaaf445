#!/usr/bin/env bash
# Packs binaries built here, with the shared libraries they need that a bare CUDA image lacks, into one archive
# to carry to the GPU machine (which has no Debian packages and cannot install any):
#   bench/device_bundle.sh [--programs-only] BUILD_DIR OUT.tar.xz PROGRAM...
# There: tar xJf OUT.tar.xz -C /tmp/b; LD_LIBRARY_PATH=/tmp/b/lib:$CUBLAS_DIR /tmp/b/bin/PROGRAM
# glibc, the C++ runtime and the OpenCL ICD loader come from the machine (its loader knows its drivers); cuBLASLt
# from its CUDA Python packages (CUBLAS_DIR: nvidia/cublas/lib), which tfm opens on its first matmul.
# --programs-only leaves the libraries out (a second build beside a full bundle, as gpu_session.sh's ab section
# takes it); xz's largest dictionary lets the programs share one another's bytes, which keeps the carry small.
set -euo pipefail
contents="bin lib"
if [[ $1 == --programs-only ]]; then
  contents=bin
  shift
fi
build=$1
out=$2
shift 2
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for program in "$@"; do
  cp "$build/$program" "$stage/bin/"
  ldd "$build/$program" | awk '$3 ~ /^\// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libcublas*|libcuda.so*|libOpenCL.so*) ;;
      *) cp -L "$lib" "$stage/lib/" ;;
    esac
  done
done
strip --strip-unneeded "$stage"/bin/* 2>/dev/null || true
tar cf - -C "$stage" $contents | xz -9e -T1 > "$out"
ls -la "$out"
