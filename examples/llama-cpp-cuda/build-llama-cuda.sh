# Builder of the llama.cpp derivations (run by /bin/sh with the variables the flake sets):
# $src the source tree, $cuda CUDA's compiler set (empty: a CPU build), $targets, $tests.
set -eu
export HOME="$TMPDIR"
cd "$TMPDIR"
cp -r "$src" tree
chmod -R u+w tree
mkdir -p "$out/bin" "$out/lib" "$out/libexec/llama-tests" "$out/share/tests"

first() { for f in "$@"; do [ -e "$f" ] && { echo "$f"; return 0; }; done; return 1; }

cuda_args=""
cuda_flags=""
if [ -n "$cuda" ]; then
  # cuBLAS and libcuda from the host (see flake.nix), its headers from the toolchain (the host's
  # include directory would mix its own CUDA's headers in): the toolkit's directories first, then
  # the wheels of a Python environment, then the system's.
  roots="/usr/local/cuda /usr/local/cuda-13 /usr/local/cuda-13.0 /opt/cuda"
  sites=$(ls -d /opt/torch/.venv/lib/python3*/site-packages /usr/local/lib/python3*/dist-packages \
    /usr/lib/python3/dist-packages /opt/cuda-host 2>/dev/null || true)
  libdirs=""; incdirs=""
  for r in $roots; do
    libdirs="$libdirs $r/lib64 $r/lib $r/targets/x86_64-linux/lib"
    incdirs="$incdirs $r/include $r/targets/x86_64-linux/include"
  done
  for s in $sites; do
    libdirs="$libdirs $s/nvidia/cu13/lib $s/nvidia/cublas/lib"
    incdirs="$incdirs $s/nvidia/cu13/include $s/nvidia/cublas/include"
  done
  libdirs="$libdirs /usr/lib/x86_64-linux-gnu"; incdirs="$incdirs /usr/include"
  cublas_lib=""; for d in $libdirs; do [ -e "$d/libcublas.so.13" ] && { cublas_lib=$d; break; }; done
  cublas_inc=""; for d in "$cuda/include" $incdirs; do [ -e "$d/cublas_v2.h" ] && { cublas_inc=$d; break; }; done
  libcuda=""
  for r in $roots; do
    libcuda=$(first "$r/lib64/stubs/libcuda.so" "$r/lib/stubs/libcuda.so" \
      "$r/targets/x86_64-linux/lib/stubs/libcuda.so") && break || libcuda=""
  done
  [ -n "$libcuda" ] || libcuda=$(first /usr/lib/x86_64-linux-gnu/libcuda.so.1 \
    /usr/local/nvidia/lib64/libcuda.so.1 /usr/lib64/libcuda.so.1) || libcuda=""
  if [ -z "$cublas_lib" ] || [ -z "$cublas_inc" ] || [ -z "$libcuda" ]; then
    echo "host CUDA libraries not found: cuBLAS 13 (lib: '${cublas_lib}', headers: '${cublas_inc}')," \
      "libcuda ('${libcuda}'). Install CUDA 13's cuBLAS (or pip install nvidia-cublas into" \
      "/opt/cuda-host/nvidia/...) and the NVIDIA driver or CUDA's stubs." >&2
    exit 1
  fi
  {
    echo "cublas_lib=$cublas_lib"; echo "cublas_inc=$cublas_inc"; echo "libcuda=$libcuda"
    ls "$cublas_lib"/libcublas.so.* 2>/dev/null | head -3
  } > "$out/share/host-cuda.txt"
  "$cuda/bin/nvcc" --version > "$out/share/nvcc-version"
  # nvcc.profile links from lib64/, the wheels' layout has lib/ (libcudart_static.a among them).
  export NVCC_APPEND_FLAGS="-L$cuda/lib"
  # -Xptxas=-v: ptxas reports every kernel's registers, stack frame and spills into the build
  # log, kept as share/ptxas.log for the compile stage.
  cuda_flags="-Xptxas=-v -I$cublas_inc"
  cuda_args="-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER=$cuda/bin/nvcc
    -DCUDAToolkit_ROOT=$cuda -DCUDA_cublas_LIBRARY=$cublas_lib/libcublas.so.13
    -DCUDA_cublasLt_LIBRARY=$cublas_lib/libcublasLt.so.13 -DCUDA_cuda_driver_LIBRARY=$libcuda"
  rpath="$out/lib;$cuda/lib;$cublas_lib"
else
  rpath="$out/lib"
fi
c++ --version > "$out/share/host-compiler"

# shellcheck disable=SC2086 # the argument lists split on purpose
cmake -S tree -B build -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "-DCMAKE_INSTALL_RPATH=$rpath" \
  "-DCMAKE_CUDA_FLAGS=$cuda_flags" $cuda_args \
  -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
ninja -C build -j "${NIX_BUILD_CORES:-2}" $targets > build.log 2>&1 || { tail -60 build.log >&2; exit 1; }
grep -E "^ptxas (info|warning)|bytes stack frame|Compiling entry|Function properties|Used [0-9]+ registers" \
  build.log > "$out/share/ptxas.log" || true
cp -P build/bin/*.so* "$out/lib/"
for t in $targets; do
  case " $tests " in
    *" $t "*) cp "build/bin/$t" "$out/libexec/llama-tests/" ;;
    *) cp "build/bin/$t" "$out/bin/" ;;
  esac
done
# test-backend-ops -b CUDA0 checks the CUDA kernels against the CPU backend, one ctest entry per
# operator family (-j 8: the CPU side of the comparison on 8 threads); flash attention at the
# model's head size, 256, only (every head size would take minutes). ctest runs these from a copy
# of share/tests.
{
  echo "# operator tests of $out"
  for t in $tests; do
    for op in MUL_MAT MUL_MAT_ID FLASH_ATTN_EXT ROPE SOFT_MAX RMS_NORM GET_ROWS CPY ADD; do
      extra=""
      [ "$op" = FLASH_ATTN_EXT ] && extra=' "-p" "hsk=256"'
      echo "add_test($t-$op \"$out/libexec/llama-tests/$t\" \"-b\" \"CUDA0\" \"-o\" \"$op\" \"-j\" \"8\"$extra)"
    done
  done
} > "$out/share/tests/CTestTestfile.cmake"
