#!/usr/bin/env bash
# Adds the CUDA arms a GPU host built (host.sh with QUALIFY_SEND_ARMS=1) to this machine's store,
# so that `pack.sh --arms` sends them to later leases instead of their 16 cores building them:
#
#     examples/llama-cpp-cuda/offline/receive-arms.sh DIR...
#
# DIR: the folders the steps' $OUT files came back to, in any order; between them they hold
# arms.list and every piece it counts. The pieces are checked (all there, the xz stream whole)
# before anything is imported, and the import is checked against the paths arms.list names.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 DIR... (the folders holding arms.list and arms.nar.xz.NN)" >&2; exit 2; }
list=$(for d in "$@"; do [ -f "$d/arms.list" ] && echo "$d/arms.list"; done | head -1)
[ -n "$list" ] || { echo "no arms.list in $*: the host step that exported the arms wrote it" >&2; exit 2; }
want=$(sed -n 's/^pieces //p' "$list")
declare -A piece=()
for d in "$@"; do
  for f in "$d"/arms.nar.xz.[0-9][0-9]; do [ -f "$f" ] && piece[$(basename "$f")]=$f; done
done
[ "${#piece[@]}" = "$want" ] || {
  echo "$list counts $want pieces; $* hold ${#piece[@]} (${!piece[*]}): fetch the other steps' files first" >&2
  exit 2
}
ordered=$(printf '%s\n' "${!piece[@]}" | sort | while read -r name; do echo "${piece[$name]}"; done)
# shellcheck disable=SC2086 # one file per word
cat $ordered | xz -t || { echo "the pieces do not make one whole xz stream: a piece is damaged or missing" >&2; exit 2; }
export NIX_CONFIG=${NIX_CONFIG:-$'experimental-features = nix-command flakes\nbuild-users-group =\nsubstituters ='}
# shellcheck disable=SC2086
imported=$(cat $ordered | xz -d | nix-store --import)
expected=$(sed -n 's/^path //p' "$list")
[ "$(sort <<< "$imported")" = "$(sort <<< "$expected")" ] || {
  echo "imported $imported, but $list names $expected" >&2
  exit 1
}
echo "imported $(wc -l <<< "$imported") arms ($(sed -n 's/^attr //p' "$list" | tr '\n' ' ')):"
echo "$imported"
