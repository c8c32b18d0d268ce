#!/usr/bin/env bash
# The host libraries the CUDA arms link against, for a machine without an NVIDIA GPU or CUDA
# toolkit that builds the arms for a GPU host (pack.sh --arms): cuBLAS 13.1.0.3 from NVIDIA's
# PyPI wheel (the version the H200 image's CUDA 13.0 carries) and a link-time stub of the
# driver's libcuda, both under PREFIX (/opt/cuda unless given), which build-llama-cuda.sh
# searches. The stub, like the stubs/ directory of a CUDA toolkit, defines every driver API
# function cuda.h declares and does nothing: it is named libcuda.so.1, so a binary linked
# against it loads the host driver's own libcuda at run time. On the GPU host host.sh points
# PREFIX at the host's CUDA (a link to /usr/local/cuda), where the arms' RPATH looks for cuBLAS.
set -euo pipefail
prefix=${1:-/opt/cuda}
python=${PYTHON:-python3}
here=$(cd "$(dirname "$0")/.." && pwd)
# cuda.h of the pinned toolchain tree, which setup.sh put in the store.
hash=$(sed -n '/name = "cuda_nvcc-13.0.88"/{n;s/.*hash = "\(.*\)";.*/\1/p}' "$here/flake.nix")
tree=$(nix-store --print-fixed-path --recursive sha256 "$hash" cuda_nvcc-13.0.88)
cuda_include=${CUDA_INCLUDE:-$tree/include}
[ -f "$cuda_include/cuda.h" ] || { echo "$cuda_include/cuda.h: not there; run setup.sh first" >&2; exit 1; }
lib=$prefix/lib64
mkdir -p "$lib/stubs"
if [ ! -e "$lib/libcublas.so.13" ]; then
  tmp=$(mktemp -d)
  "$python" -m pip download -q --no-deps --only-binary=:all: -d "$tmp" nvidia-cublas==13.1.0.3
  "$python" -m zipfile -e "$tmp"/nvidia_cublas-*.whl "$tmp/x"
  cp -a "$tmp"/x/nvidia/cu13/lib/libcublas*.so* "$lib/"
  rm -rf "$tmp"
fi
if [ ! -e "$lib/stubs/libcuda.so" ]; then
  tmp=$(mktemp -d)
  # Every CUresult function cuda.h declares, under its versioned names (cuMemAlloc_v2) and its
  # plain ones (as declared with __CUDA_API_VERSION_INTERNAL).
  for d in "" -D__CUDA_API_VERSION_INTERNAL; do
    echo '#include <cuda.h>' | cc -E $d -I"$cuda_include" -x c -
  done | tr '\n' ' ' | grep -oE 'CUresult +cu[A-Za-z0-9_]+ *\(' | sed -E 's/CUresult +//; s/ *\(//' \
    | sort -u | sed 's/.*/int &(void) { return 999; }/' > "$tmp/stub.c"
  cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$lib/stubs/libcuda.so" "$tmp/stub.c"
  echo "libcuda stub: $(wc -l < "$tmp/stub.c") functions"
  rm -rf "$tmp"
fi
# ld looks for a shared library's own needs (libggml-cuda.so needs libcuda.so.1) by that name in
# the -rpath directories the executables are linked with, which name $lib: without this link
# every executable fails to link ("libcuda.so.1, needed by libggml-cuda.so, not found"). At run
# time it would load the stub, but only here, where there is no GPU: on the GPU host $lib is the
# host's CUDA (host.sh), and libcuda.so.1 is the driver's.
ln -sfn stubs/libcuda.so "$lib/libcuda.so.1"
ls "$lib" "$lib/stubs"
