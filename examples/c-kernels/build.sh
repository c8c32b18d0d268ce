# Builder of the c-kernels derivations, run by /bin/sh with the variables the flake sets: src (the
# sources), cc (a compiler derivation: bin/cc and its `version`) and opt (the optimisation flag).
set -eu
cd "$TMPDIR"
# -fstack-usage writes a .su file beside each object: the compile stage reads the kernels' stack
# frames from share/stack-usage. No -march: baseline x86-64 (SSE2), the same code on every host,
# and no FMA that clang would contract a * b + c into while gcc does not (-std=c11 keeps gcc's
# contraction off), so every arm rounds alike and the numerics compare the compilers' kernels.
flags="-std=c11 $opt -Wall -Wextra -fstack-usage"
mkdir -p obj "$out/bin" "$out/lib" "$out/include" "$out/share/stack-usage"
for unit in ck_blas ck_norm; do
  "$cc/bin/cc" $flags -fPIC -c "$src/$unit.c" -o "obj/$unit.o"
done
"$cc/bin/cc" -shared -Wl,-soname,libck.so -o "$out/lib/libck.so" obj/ck_blas.o obj/ck_norm.o -lm
# The programs link libck.so from this output (RPATH): the kernels they run are the library's,
# the ones the compile stage reads, not copies linked into each program.
for program in ck_bench ck_accuracy ck_tests; do
  "$cc/bin/cc" $flags -c "$src/$program.c" -o "obj/$program.o"
  "$cc/bin/cc" -o "$out/bin/$(echo "$program" | tr _ -)" "obj/$program.o" \
    -L"$out/lib" -lck -lm -Wl,-rpath,"$out/lib"
done
cp obj/*.su "$out/share/stack-usage/"
cp "$src/ck.h" "$out/include/"
cp "$cc/version" "$out/share/compiler-version"
echo "$opt" > "$out/share/optimisation"
