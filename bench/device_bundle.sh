#!/usr/bin/env bash
# Packs binaries built here, with the shared libraries they need that a bare CUDA image lacks, into one archive
# to carry to the GPU machine (which has no Debian packages and cannot install any):
#   bench/device_bundle.sh [--next NEXT_DIR] BUILD_DIR OUT.tar.xz PROGRAM...
# There: tar xJf OUT.tar.xz -C /tmp/b; LD_LIBRARY_PATH=/tmp/b/lib:$CUBLAS_DIR /tmp/b/bin/PROGRAM
# glibc, the C++ runtime and the OpenCL ICD loader come from the machine (its loader knows its drivers); cuBLASLt
# from its CUDA Python packages (CUBLAS_DIR: nvidia/cublas/lib), which tfm opens on its first matmul.
# --next adds the programs in NEXT_DIR (copied there from another build: a branch's) under next/bin, which
# gpu_session.sh's ab sections compare with bin/, run with the same libraries. In one archive, with a
# dictionary larger than the whole, the builds share what they have in common (tfm, test_kernels and
# test_device_ops of two builds with the libraries: 24.5 MB, against 27.8 MB in two archives), which keeps
# the carry under its 64 MiB. Build a branch's programs from the checkout that travels (switch branches in it,
# keeping the base build's programs aside): test programs open their fixtures under the source folder they were
# built from (TFM_SOURCE_DIR), and one built in another worktree finds none on the GPU machine.
set -euo pipefail
contents="bin lib"
next=""
if [[ $1 == --next ]]; then
  next=$2
  shift 2
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
if [[ -n $next ]]; then
  mkdir -p "$stage/next/bin"
  cp "$next"/* "$stage/next/bin/"
  contents="$contents next"
fi
strip --strip-unneeded "$stage"/bin/* "$stage"/next/bin/* 2>/dev/null || true
tar cf - -C "$stage" $contents | xz -T1 --lzma2=preset=9e,dict=768MiB > "$out"
ls -la "$out"
