# Builder of the llama.cpp derivations (run by /bin/sh with the variables the flake sets):
# $src the source tree, $rocm the ROCm toolchain root, $llvm its clang's major version,
# $gpus the AMDGPU targets (;-separated), $targets the tools, $tests the test programs,
# $enter the script that enters the root (bubblewrap), $components the toolchain's views.
set -eu
export HOME="$TMPDIR"
cd "$TMPDIR"
cp -r "$src" tree
chmod -R u+w tree
mkdir -p "$out/bin" "$out/lib" "$out/libexec/llama" "$out/libexec/llama-tests" "$out/share/tests"
in_root() { "$enter" "$rocm" --bind "$TMPDIR" --bind "$out" -- "$@"; }

# The toolchain as the build sees it, kept with the arm: the .debs the root was made of and
# each compiler's own version line.
cp "$rocm/DEBS" "$out/share/rocm-debs.txt"
in_root "/usr/lib/llvm-$llvm/bin/clang++" --version > "$out/share/clang-version"
in_root /usr/bin/hipconfig --version > "$out/share/hipconfig-version" 2>&1 || true

# Debian lays ROCm out under /usr, so CMake finds HIP, hipBLAS and rocBLAS without ROCM_PATH.
# minbase has no gcc: clang-N compiles the C and C++ too. GGML_NATIVE=OFF: nothing of the build
# machine's CPU goes into the library.
# $gpus empty: the same source on the CPU (the numerics reference), portable, in the same root.
hip_args=""
[ -z "$gpus" ] || hip_args="-DGGML_HIP=ON -DAMDGPU_TARGETS=$gpus -DGPU_TARGETS=$gpus
  -DCMAKE_HIP_COMPILER=/usr/lib/llvm-$llvm/bin/clang++"
# shellcheck disable=SC2086 # the argument lists split on purpose
in_root cmake -S "$TMPDIR/tree" -B "$TMPDIR/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DGGML_NATIVE=OFF \
  $hip_args \
  "-DCMAKE_C_COMPILER=clang-$llvm" "-DCMAKE_CXX_COMPILER=clang++-$llvm" \
  -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON "-DCMAKE_INSTALL_RPATH=$out/lib" \
  -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF > configure.log 2>&1 \
  || { tail -60 configure.log >&2; exit 1; }
# shellcheck disable=SC2086 # the target list splits on purpose
in_root ninja -C "$TMPDIR/build" -j "${NIX_BUILD_CORES:-2}" $targets $tests > build.log 2>&1 \
  || { tail -60 build.log >&2; exit 1; }
cp -P build/bin/*.so* "$out/lib/"
# What the build took, kept with the arm: ninja's log (each step's start and end, in ms) and the
# CPU time of everything this builder waited for.
cp build/.ninja_log "$out/share/ninja-log"
times > "$out/share/build-times"

# The programs run inside the root too (they link its glibc, HIP runtime, hipBLAS and rocBLAS):
# bin/NAME enters it and runs libexec/llama/NAME. Without an AMD GPU of one of the targets it
# stops before anything starts: ggml would otherwise fall back to the CPU and a runtime check
# would measure the wrong thing.
for t in $targets $tests; do
  case " $tests " in
    *" $t "*) dir="$out/libexec/llama-tests" ;;
    *) dir="$out/libexec/llama" ;;
  esac
  cp "build/bin/$t" "$dir/"
  [ "$dir" = "$out/libexec/llama" ] || continue
  cat > "$out/bin/$t" <<WRAP
#!/bin/sh
# $t of $out, run inside its ROCm root ($rocm).
${gpus:+"$out/libexec/amd-device" "$gpus" > /dev/null || exit 75}
exec "$enter" "$rocm" --bind "\$PWD" \${TMPDIR:+--bind "\$TMPDIR"} \${QUALIFY_BIND:+--bind "\$QUALIFY_BIND"} -- \
  env \${ROCBLAS_TENSILE_LIBPATH:+ROCBLAS_TENSILE_LIBPATH=\$ROCBLAS_TENSILE_LIBPATH} "$out/libexec/llama/$t" "\$@"
WRAP
  chmod +x "$out/bin/$t"
done
cp "$probe" "$out/libexec/amd-device"
chmod +x "$out/libexec/amd-device"

# The toolchain's own disassembler, for the compile stage's instruction mix: it knows every
# instruction this clang emits for the target. It runs in the root (it links the root's libLLVM
# and glibc) and sees the caller's folder and $TMPDIR, where the code objects it reads are.
mkdir -p "$out/libexec/toolchain"
cat > "$out/libexec/toolchain/llvm-objdump" <<WRAP
#!/bin/sh
# llvm-objdump of clang $llvm in $rocm.
exec "$enter" "$rocm" --bind "\$PWD" \${TMPDIR:+--bind "\$TMPDIR"} -- "/usr/lib/llvm-$llvm/bin/llvm-objdump" "\$@"
WRAP
chmod +x "$out/libexec/toolchain/llvm-objdump"

# test-backend-ops -b ROCm0 checks the HIP kernels against the CPU backend, one ctest entry per
# operator family; ctest runs these from a copy of share/tests, on an AMD host.
{
  echo "# operator tests of $out"
  for t in $tests; do
    for op in MUL_MAT MUL_MAT_ID FLASH_ATTN_EXT ROPE SOFT_MAX RMS_NORM GET_ROWS CPY ADD; do
      echo "add_test($t-$op \"$out/libexec/amd-device\" \"$gpus\" \"--run\" \"$enter\" \"$rocm\" \"$out/libexec/llama-tests/$t\" \"-b\" \"ROCm0\" \"-o\" \"$op\")"
    done
  done
} > "$out/share/tests/CTestTestfile.cmake"
