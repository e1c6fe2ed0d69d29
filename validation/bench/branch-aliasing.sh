#!/usr/bin/env bash
# Which branch wrote the predictor counter a misprediction read: replays cachegrind's conditional
# predictor (16k 2-bit counters, 7 history bits above 7 address bits) over the body trace of the
# original and of its clone, each under the same load (2,000 req/s: 1 s unmeasured, then 5 s
# counted; the original's keys stored first), and prints per request the mispredictions by file, the aliased ones
# (another branch wrote the counter last) by victim and aggressor file, and the clone's by branch kind
# (body loop back-edges, rep-string iterations, never/pattern/data-dependent branches, ring exits, the
# runtime) and by function (each body cluster, the runtime's functions). Single-process targets only
# (the replay reads one process's stream): memcached, pix-*.
# Usage: validation/bench/branch-aliasing.sh [TARGET [CLONE_DIR]]   (default memcached, clones/TARGET)
# Writes out/bench/branch-aliasing/TARGET/{original,clone}.tsv (per branch site; OUT=DIR elsewhere).
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${1:-memcached}
clone=${2:-clones/$target}
spec=targets/$target.toml
[ -f "$spec" ] || { echo "branch-aliasing: no $spec" >&2; exit 1; }
[ -f "$clone/target.toml" ] || { echo "branch-aliasing: $clone is not a clone folder (no target.toml)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "branch-aliasing: valgrind is missing; run scripts/setup.sh" >&2; exit 1; }
cargo build --quiet --release -p ditto-cli
cargo build --quiet --release -p ditto-body --example branch_aliasing
replay=target/release/examples/branch_aliasing
ditto=target/release/ditto
# Reports, load results and logs stay in out/bench/branch-aliasing/TARGET (OUT overrides).
work=${OUT:-out/bench/branch-aliasing/$target}
rm -rf "$work"
mkdir -p "$work"
pid=
cleanup() {
  [ -z "$pid" ] || { pkill -INT -P "$pid" 2>/dev/null; kill "$pid" 2>/dev/null; } || true
}
trap cleanup EXIT
# The original's command line from its spec ({{spec_dir}}, {{port}}); a spec whose server drops to
# another user (memcached's `user`) runs under Valgrind as root with the program's own -u.
original_command() {
  python3 - "$spec" "$1" <<'PY'
import os, shlex, sys, tomllib
spec, port = sys.argv[1], sys.argv[2]
s = tomllib.load(open(spec, "rb"))["server"]
if "run_dir" in " ".join(s["command"]) or s.get("files"):
    sys.exit("branch-aliasing: this target needs a run folder (a multi-process server); not supported")
d = os.path.dirname(os.path.abspath(spec))
cmd = [a.replace("{{spec_dir}}", d).replace("{{port}}", port) for a in s["command"]]
if s.get("user"):
    if os.path.basename(cmd[0]) != "memcached":
        sys.exit("branch-aliasing: the spec's user is only handled for memcached (-u)")
    cmd[1:1] = ["-u", s["user"]]
print(s.get("nofile", 0), shlex.join(cmd))
PY
}
# run NAME SPEC_FOR_LOAD PORT warm|cold COMMAND...: the replay over COMMAND; counting starts once the
# server is up, (warm) its keys are stored and 1 s of load has passed, and covers 5 s of load.
run() {
  local name=$1 load_spec=$2 port=$3 warm=$4
  shift 4
  "$replay" --start-file "$work/$name.start" --out "$work/$name.tsv" -- "$@" >"$work/$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 60); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 1
  done
  local warm_flag=()
  [ "$warm" = warm ] && warm_flag=(--warm)
  "$ditto" load --target "$load_spec" --addr "127.0.0.1:$port" "${warm_flag[@]}" --rate 2000 \
    --duration 1 --warmup 0 >/dev/null 2>&1
  touch "$work/$name.start"
  "$ditto" load --target "$load_spec" --addr "127.0.0.1:$port" --rate 2000 --duration 5 --warmup 0 \
    --json "$work/$name-load.json" >"$work/$name-load.log" 2>&1
  # The replay runs in the background, where bash leaves SIGINT ignored: stop the program under
  # Valgrind (the replay's child) and the replay writes its report when the stream ends.
  pkill -INT -P "$pid" || true
  wait "$pid" || true
  pid=
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests_completed"])' \
    "$work/$name-load.json" >"$work/$name.requests"
}
port=$((22000 + RANDOM % 3000))
read -r nofile cmd < <(original_command "$port")
echo "== $target, the original: $cmd"
# shellcheck disable=SC2086
( [ "$nofile" -gt 0 ] && ulimit -n "$nofile"; run original "$spec" "$port" warm $cmd
  python3 validation/bench/branch_aliasing.py "$work/original.tsv" "$(cat "$work/original.requests")" )
make -s -C "$clone" >/dev/null
port=$((22000 + RANDOM % 3000))
echo "== $target, the clone $clone"
run clone "$clone/target.toml" "$port" cold "$clone/clone" --port "$port"
python3 validation/bench/branch_aliasing.py "$work/clone.tsv" "$(cat "$work/clone.requests")" "$clone/clone"
