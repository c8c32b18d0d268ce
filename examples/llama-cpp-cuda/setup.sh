#!/usr/bin/env bash
# Set up the CUDA example: the trimmed llama.cpp source and both CUDA toolchains in the nix
# store, and the model and corpus (shared with the CPU example). Idempotent.
#
#   setup.sh            the two arms' toolchains, the source, the model and corpus
#   setup.sh --series   every pinned toolchain, 13.0.48 to 13.5.37 (`cuda_toolchain.py --list`),
#                       and the source: what the kernel slices (flake.nix, slice-*) build from.
#                       The llama-cpp-python sdist must be in the store (plain setup.sh puts it).
set -euo pipefail
series=0
case "${1:-}" in
  "") ;;
  --series) series=1 ;;
  *) echo "usage: $0 [--series]" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
: "${NIX_CONFIG:=$'experimental-features = nix-command flakes\nbuild-users-group =\nsubstituters ='}"
export NIX_CONFIG
work=${QUALIFY_CUDA_WORK:-$here/data/work}
mkdir -p "$work"

# A tree added by its content: the store path is fixed by the NAR hash flake.nix pins.
add_tree() { # DIR NAME HASH
  local dir=$1 name=$2 hash=$3 got
  got=$(nix-hash --type sha256 --base32 "$dir")
  if [ "$got" != "$hash" ]; then
    echo "$name: content hash $got, flake.nix pins $hash: not the same tree" >&2
    exit 1
  fi
  nix-store --add-fixed --recursive sha256 "$dir" > /dev/null
  echo "$name: $(nix-store --print-fixed-path --recursive sha256 "$hash" "$name") (added)"
}
in_store() { # NAME HASH
  nix-store --check-validity "$(nix-store --print-fixed-path --recursive sha256 "$2" "$1")" 2>/dev/null
}
pinned_hash() { # NAME: the hash flake.nix gives the tree of that name
  sed -n "/name = \"$1\"/{n;s/.*hash = \"\\(.*\\)\";.*/\\1/p}" "$here/flake.nix"
}

# The source: the CPU example's setup puts the sdist in the store (and fetches the model and
# corpus, which this example shares).
if [ "$series" = 0 ]; then
  "$here/../llama-cpp/setup.sh"
  ln -sfn ../../llama-cpp/data/gemma-3-270m-q4_k_m.gguf "$here/data/gemma-3-270m-q4_k_m.gguf"
  ln -sfn ../../llama-cpp/data/corpus.txt "$here/data/corpus.txt"
fi

src_name=llama-cpp-src-0.3.36
src_hash=$(pinned_hash "$src_name")
if in_store "$src_name" "$src_hash"; then
  echo "$src_name: in the store"
else
  sdist=$(nix-store --print-fixed-path sha256 \
    832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e llama_cpp_python-0.3.36.tar.gz)
  if ! nix-store --check-validity "$sdist" 2>/dev/null; then
    echo "$sdist is not in the store: run $0 (without --series) first" >&2
    exit 1
  fi
  rm -rf "${work:?}/$src_name" "$work/unpack" && mkdir -p "$work/unpack"
  tar -C "$work/unpack" -xzf "$sdist" llama_cpp_python-0.3.36/vendor/llama.cpp
  mv "$work/unpack/llama_cpp_python-0.3.36/vendor/llama.cpp" "$work/$src_name"
  # Nothing a build reads: models (test vocabularies), docs, benches, media, CI, converters.
  (cd "$work/$src_name" && rm -rf models docs benches media .github conversion gguf-py)
  add_tree "$work/$src_name" "$src_name" "$src_hash"
  rm -rf "${work:?}/$src_name" "$work/unpack"
fi

versions="13.0.88 13.5.37"
[ "$series" = 0 ] || versions=$("$python" "$here/cuda_toolchain.py" --list)
for version in $versions; do
  name=cuda_nvcc-$version
  hash=$(pinned_hash "$name")
  if in_store "$name" "$hash"; then
    echo "$name: in the store"
  else
    "$python" "$here/cuda_toolchain.py" "$version" "$work/$name"
    add_tree "$work/$name" "$name" "$hash"
    rm -rf "${work:?}/$name"  # the store holds it now
  fi
done
