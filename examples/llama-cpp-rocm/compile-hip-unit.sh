# Builder of one remedy unit (run by /bin/sh with the variables the flake sets): one HIP source
# of libggml-hip.so compiled for the device alone, with the flags ggml's CMake gives every
# ggml-hip source in a Release build of shared libraries, then the variant's own flags.
# $src the source tree, $rocm the toolchain root, $llvm its clang's major version, $gpus the
# target, $source_path the source (relative to $src), $ggmlFlags and $variantFlags the flags
# (one per line), $enter the script that enters the root.
set -eu
export HOME="$TMPDIR"
mkdir -p "$out/lib" "$out/share"
name=$(basename "$source_path" .cu)
# One flag per line: a flag may hold spaces or quotes (GGML_CUDA_FA_QUANTS' list) and must reach
# clang as one argument.
set --
while IFS= read -r flag; do [ -z "$flag" ] || set -- "$@" "$flag"; done <<FLAGS
$ggmlFlags
$variantFlags
FLAGS
# The device code alone (--offload-device-only): the code object the library's bundle holds for
# this source, without the host half nothing here reads.
"$enter" "$rocm" --bind "$TMPDIR" --bind "$out" -- "/usr/lib/llvm-$llvm/bin/clang++" \
  "-I$src/ggml/src" "-I$src/ggml/include" "$@" "--offload-arch=$gpus" --offload-device-only \
  -x hip -c "$src/$source_path" -o "$out/lib/$name.co" 2> "$out/share/$name.log" \
  || { tail -40 "$out/share/$name.log" >&2; exit 1; }
printf '%s\n' "$source_path" > "$out/share/source"
printf '%s\n' "$@" > "$out/share/flags"
