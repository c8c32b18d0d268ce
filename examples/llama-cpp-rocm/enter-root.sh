#!/bin/sh
# enter-root.sh ROOT [--bind DIR]... -- COMMAND...
# Runs COMMAND inside a ROCm toolchain root (rocm_toolchain.py) with bubblewrap: the root's /usr
# and /etc read-only, the merged-/usr links, /nix/store read-only, a fresh /tmp, /dev and /proc,
# and each --bind DIR writable at its own path. No network, no other host path: what a build
# reads comes from the root or the store. /dev/kfd and /dev/dri are passed through where they
# exist (the HIP runtime's devices on an AMD host).
set -eu
root=$1; shift
binds=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  [ "$1" = "--bind" ] || { echo "enter-root.sh: expected --bind DIR or --, got '$1'" >&2; exit 2; }
  binds="$binds --bind $2 $2"; shift 2
done
[ "$#" -gt 0 ] && shift
[ -x "$root/usr/bin/sh" ] || { echo "enter-root.sh: $root is not a toolchain root (no usr/bin/sh)" >&2; exit 2; }
command -v bwrap > /dev/null || { echo "enter-root.sh: bubblewrap (bwrap) is not installed: apt-get install bubblewrap" >&2; exit 2; }
devices=""
for d in /dev/kfd /dev/dri; do [ -e "$d" ] && devices="$devices --dev-bind $d $d"; done
# shellcheck disable=SC2086 # the argument lists split on purpose
exec bwrap --ro-bind "$root/usr" /usr --ro-bind "$root/etc" /etc \
  --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin \
  --ro-bind /nix/store /nix/store --dev /dev --proc /proc --tmpfs /tmp $devices $binds \
  --unshare-net --unshare-ipc --unshare-pid --die-with-parent \
  --setenv PATH /usr/bin --setenv HOME /tmp --setenv LC_ALL C.UTF-8 -- "$@"
