# Builder of the llama.cpp derivations (run by /bin/sh with the variables the flake sets).
set -eu
export HOME="$TMPDIR"
cd "$TMPDIR"
tar xzf "$src"
tree="$TMPDIR/llama_cpp_python-0.3.36/vendor/llama.cpp"
no_amx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
# -fstack-usage leaves a .su file per object: the compile stage reads stack frame sizes.
# AMX is off: some virtual machines list it in /proc/cpuinfo without granting it, and a native
# build then dies of SIGILL on its first tile instruction; AVX-512 and below stay native. With
# GGML_NATIVE, -march=native turns AMX on whatever GGML_AMX_* say: the -mno-amx-* flags win.
# The portable build (GGML_NATIVE off) would still default to AVX2, FMA, F16C and BMI2: on a host
# whose native set is just that, the reference and the native builds run the same kernels and
# score bit for bit alike, which leaves numerics nothing to compare. SSE 4.2 and AVX only keep it
# a different computation on every x86-64 host that runs the native arms.
portable=""
[ "$native" = ON ] || portable="-DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF"
cmake -S "$tree" -B build -G Ninja \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER="$cc/bin/cc" -DCMAKE_CXX_COMPILER="$cc/bin/c++" \
  -DCMAKE_C_FLAGS="-fstack-usage $no_amx" -DCMAKE_CXX_FLAGS="-fstack-usage $no_amx" \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE="$native" $portable \
  -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
  -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
  -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
ninja -C build -j "${NIX_BUILD_CORES:-2}" $targets

mkdir -p "$out/bin" "$out/libexec/llama-tests" "$out/share/tests" "$out/share/stack-usage"
for t in $targets; do
  case " $tests " in
    *" $t "*) cp "build/bin/$t" "$out/libexec/llama-tests/" ;;
    *) cp "build/bin/$t" "$out/bin/" ;;
  esac
done
# ctest runs these from a copy of share/tests; the file names them by store path.
# test-backend-ops -b CPU checks the CPU backend's optimised kernels against its reference
# implementation, one ctest entry per operator family (FLASH_ATTN_EXT alone takes > 5 min).
# MUL_MAT, the longest (about 110 s of one core in clang's build), is two entries split by its
# cases' weight type (-p matches a case's parameters): the float weights and the rest, 717 and
# 971 of its 1 688 cases, so that `ctest -j 2` runs the halves side by side.
entry() {  # a ctest entry: its name, then the command's words
  printf 'add_test(%s' "$1"; shift
  for word in "$@"; do printf ' "%s"' "$word"; done
  echo ')'
}
{
  echo "# operator tests of $out"
  for t in $tests; do
    bin="$out/libexec/llama-tests/$t"
    case "$t" in
      test-backend-ops)
        entry "$t-MUL_MAT-float" "$bin" -b CPU -o MUL_MAT -p 'type_a=(f32|f16|bf16),'
        entry "$t-MUL_MAT-quant" "$bin" -b CPU -o MUL_MAT -p 'type_a=(?!(f32|f16|bf16),)'
        for op in ROPE SOFT_MAX RMS_NORM GET_ROWS CPY ADD; do
          entry "$t-$op" "$bin" -b CPU -o "$op"
        done ;;
      *) entry "$t" "$bin" ;;
    esac
  done
} > "$out/share/tests/CTestTestfile.cmake"
(cd build && find . -name '*.su' -exec cp --parents {} "$out/share/stack-usage/" \;)
cp "$cc/version" "$out/share/compiler-version"
