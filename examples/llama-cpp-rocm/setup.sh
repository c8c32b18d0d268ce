#!/usr/bin/env bash
# Set up the ROCm example: the trimmed llama.cpp source and both ROCm toolchain roots in the nix
# store, and the model and corpus (shared with the CPU example). Idempotent. Needs
# bubblewrap (apt-get install bubblewrap), dpkg-deb and Debian's archive (about 1.6 GB of .debs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
: "${NIX_CONFIG:=$'experimental-features = nix-command flakes\nbuild-users-group =\nsubstituters ='}"
export NIX_CONFIG
work=${QUALIFY_ROCM_WORK:-$here/data/work}
mkdir -p "$work"

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

# The source, the model and the corpus: as the CPU example has them.
"$here/../llama-cpp/setup.sh"
mkdir -p "$here/data"
ln -sfn ../../llama-cpp/data/gemma-3-270m-q4_k_m.gguf "$here/data/gemma-3-270m-q4_k_m.gguf"
ln -sfn ../../llama-cpp/data/corpus.txt "$here/data/corpus.txt"

src_name=llama-cpp-src-0.3.36
src_hash=$(pinned_hash "$src_name")
if in_store "$src_name" "$src_hash"; then
  echo "$src_name: in the store"
else
  sdist=$(nix-store --print-fixed-path sha256 \
    832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e llama_cpp_python-0.3.36.tar.gz)
  rm -rf "${work:?}/$src_name" "$work/unpack" && mkdir -p "$work/unpack"
  tar -C "$work/unpack" -xzf "$sdist" llama_cpp_python-0.3.36/vendor/llama.cpp
  mv "$work/unpack/llama_cpp_python-0.3.36/vendor/llama.cpp" "$work/$src_name"
  (cd "$work/$src_name" && rm -rf models docs benches media .github conversion gguf-py)
  add_tree "$work/$src_name" "$src_name" "$src_hash"
  rm -rf "${work:?}/$src_name" "$work/unpack"
fi

for version in 6.4.3 7.2.4; do
  name=rocm-root-$version
  hash=$(pinned_hash "$name")
  if in_store "$name" "$hash"; then
    echo "$name: in the store"
  else
    "$python" "$here/rocm_toolchain.py" make "$version" "$work/$name"
    add_tree "$work/$name" "$name" "$hash"
    rm -rf "${work:?}/$name"  # the store holds it now
  fi
done
