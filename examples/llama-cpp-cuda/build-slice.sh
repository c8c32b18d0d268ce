# Builder of the kernel slices (run by /bin/sh with the variables the flake sets): $src the
# llama.cpp source tree, $cuda one CUDA toolchain tree, $sources the ggml-cuda sources to compile
# (paths under ggml/src/ggml-cuda), $flags (optional) a remedy variant's own nvcc flags, given
# after ggml's so that they win. Each becomes lib/<stem>.cubin for sm_90 and share/<stem>.log,
# ptxas's -v report of every kernel in it (registers, stack frame, spills), with the flags and
# definitions ggml's CMake gives every ggml-cuda source in a Release build of shared libraries
# (ggml/src/CMakeLists.txt, ggml/src/ggml-cuda/CMakeLists.txt; GGML_CUDA_USE_GRAPHS is on by
# default under llama.cpp). share/cuda-version is the release nvcc reports itself as.
set -eu
export HOME="$TMPDIR"
cd "$TMPDIR"
mkdir -p "$out/lib" "$out/share"
"$cuda/bin/nvcc" --version > nvcc-version
sed -n 's/^Cuda compilation tools, release .*, V\([0-9.]*\)$/\1/p' nvcc-version > "$out/share/cuda-version"
[ -s "$out/share/cuda-version" ] || { cat nvcc-version >&2; echo "no release in nvcc --version" >&2; exit 1; }

ggml="$src/ggml"
export ggml
# One source: its cubin and report, or its errors on stderr and a failure.
compile='rel=$1; stem=${rel##*/}; stem=${stem%.cu}
"$cuda/bin/nvcc" -arch=sm_90 -cubin -Xptxas -v \
  -O3 -use_fast_math -extended-lambda -Xcompiler -Wno-pedantic \
  -DNDEBUG -DGGML_SCHED_MAX_COPIES=4 -D_GNU_SOURCE -D_XOPEN_SOURCE=600 \
  -DGGML_BACKEND_BUILD -DGGML_BACKEND_SHARED -DGGML_SHARED -DGGML_CUDA_USE_GRAPHS \
  "-I$ggml/include" "-I$ggml/src" "-I$ggml/src/ggml-cuda" ${flags:-} \
  "$ggml/src/ggml-cuda/$rel" -o "$out/lib/$stem.cubin" > "$out/share/$stem.log" 2>&1 \
  || { echo "$rel:" >&2; tail -40 "$out/share/$stem.log" >&2; exit 1; }'

# NIX_BUILD_CORES is 0 where nix was told to use every core.
jobs=${NIX_BUILD_CORES:-1}
[ "$jobs" -gt 0 ] 2>/dev/null || jobs=$(nproc)
# shellcheck disable=SC2086 # $sources splits on purpose
printf '%s\n' $sources | xargs -P "$jobs" -n 1 sh -c "$compile" sh
for rel in $sources; do
  stem=${rel##*/}
  [ -s "$out/lib/${stem%.cu}.cubin" ] || { echo "$rel: no cubin" >&2; exit 1; }
done
