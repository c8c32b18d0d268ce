#!/bin/sh
# amd-device TARGETS [--run ENTER ROOT PROGRAM ARGS...]
# Succeeds (printing the devices) when this host has an AMD GPU of one of TARGETS (";"-separated
# gfx names), read from the kernel's KFD topology; else says what it found and exits 75
# (EX_TEMPFAIL: not this host). With --run, then runs PROGRAM inside ROOT. AMD_DEVICE_TOPOLOGY
# names another topology folder (default /sys/class/kfd/kfd/topology).
set -eu
topology=${AMD_DEVICE_TOPOLOGY:-/sys/class/kfd/kfd/topology}
targets=$1; shift
found=""
for props in "$topology"/nodes/*/properties; do
  [ -r "$props" ] || continue
  v=$(sed -n 's/^gfx_target_version //p' "$props")
  [ -n "$v" ] && [ "$v" != 0 ] || continue
  # gfx_target_version is major*10000 + minor*100 + stepping, the stepping in hex in gfx names.
  name=$(printf 'gfx%d%d%x' $((v / 10000)) $((v / 100 % 100)) $((v % 100)))
  found="$found $name"
done
for gfx in $found; do
  case ";$targets;" in
    *";$gfx;"*)
      if [ "${1:-}" = "--run" ]; then shift; enter=$1 root=$2; shift 2; exec "$enter" "$root" --bind "$PWD" -- "$@"; fi
      echo "$gfx"; exit 0 ;;
  esac
done
if [ ! -e /dev/kfd ] && [ -z "$found" ]; then
  echo "no AMD GPU here (no /dev/kfd): this build runs on $targets; run this stage on an AMD host" >&2
else
  echo "no AMD GPU of $targets here (found:${found:- none}); run this stage on an AMD host with one" >&2
fi
exit 75
