#!/usr/bin/env bash
# Writes arms built on this machine out in pieces small enough to come back from a GPU host's
# lease (host.sh step 9 calls it; receive-arms.sh puts them into another machine's store):
#
#     examples/llama-cpp-cuda/offline/send-arms.sh SENDDIR OUTDIR ATTR=STOREPATH...
#
# The first call exports the paths (nix-store --export: the outputs alone; their references,
# the source and toolchain trees, are what every machine adds by content) through xz into
# SENDDIR in pieces of ARMS_PIECE (12M: four of them and a step's other files stay within what
# comes back from one step) and writes SENDDIR/arms.list: the number of pieces, each path and
# attribute. Every call then moves the next ARMS_PER_STEP (4) pieces, and a copy of arms.list,
# into OUTDIR, and says how many are left.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 SENDDIR OUTDIR ATTR=STOREPATH..." >&2; exit 2; }
send=$1 out=$2
shift 2
mkdir -p "$send" "$out"
if [ ! -f "$send/arms.list" ]; then
  rm -f "$send"/arms.*
  paths=() attrs=()
  for pair in "$@"; do
    attrs+=("${pair%%=*}") paths+=("${pair#*=}")
  done
  nix-store --export "${paths[@]}" | xz -6 -T0 > "$send/arms.nar.xz"
  split -b "${ARMS_PIECE:-12M}" -d "$send/arms.nar.xz" "$send/arms.nar.xz."
  rm "$send/arms.nar.xz"
  {
    echo "pieces $(find "$send" -name 'arms.nar.xz.*' | wc -l)"
    printf 'path %s\n' "${paths[@]}"
    printf 'attr %s\n' "${attrs[@]}"
  } > "$send/arms.list.tmp"
  mv "$send/arms.list.tmp" "$send/arms.list"
  echo "arms exported: $(cat "$send"/arms.nar.xz.* | wc -c) bytes in $(sed -n 's/^pieces //p' "$send/arms.list") pieces"
fi
cp "$send/arms.list" "$out/"
find "$send" -name 'arms.nar.xz.*' | sort | head -"${ARMS_PER_STEP:-4}" | while read -r piece; do
  mv "$piece" "$out/"
  echo "arms: sending $(basename "$piece")"
done
echo "arms: $(find "$send" -name 'arms.nar.xz.*' | wc -l) pieces left to send"
