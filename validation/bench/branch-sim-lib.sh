# Shell helper for the bench scripts that read a clone's branches under cachegrind's branch simulator
# (the `sim` backend's predictor). Source it, then:
#   branch_sim_run CLONE_DIR WORK [LOAD_FLAG...]
# builds the clone, runs it under cachegrind for 8 s of its own target's traffic at 250 req/s (extra
# flags go to `ditto load`, e.g. --warm), and leaves WORK/cg.out (every process merged), WORK/load.log
# and WORK/clone.log. Sets BRANCH_SIM_PID while the clone runs; branch_sim_stop (safe to call twice)
# belongs in the caller's EXIT trap. Needs target/release/ditto and the current directory at the repo.

BRANCH_SIM_PID=""

branch_sim_stop() {
  if [ -n "$BRANCH_SIM_PID" ]; then
    kill "$BRANCH_SIM_PID" 2>/dev/null || true
    BRANCH_SIM_PID=""
  fi
}

branch_sim_run() {
  local clone=$1 work=$2 port
  shift 2
  make -s -C "$clone" >/dev/null
  port=$((22000 + RANDOM % 3000))
  # One output file per process (%p): a prefork clone's workers are forked children of its master.
  valgrind --tool=cachegrind --cache-sim=no --branch-sim=yes --cachegrind-out-file="$work/cg.out.%p" \
    "$clone/clone" --port "$port" >"$work/clone.log" 2>&1 &
  BRANCH_SIM_PID=$!
  sleep 3
  target/release/ditto load --target "$clone/target.toml" --addr "127.0.0.1:$port" --rate 250 \
    --duration 8 "$@" >"$work/load.log" 2>&1
  kill -INT "$BRANCH_SIM_PID"
  wait "$BRANCH_SIM_PID" || true
  BRANCH_SIM_PID=""
  sleep 1
  cg_merge -o "$work/cg.out" "$work"/cg.out.*
}
