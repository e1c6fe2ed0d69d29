#!/usr/bin/env bash
# Cross-checks `ditto load` against independent load generators at the same offered rate:
#   memcached: memcaslap (libmemcached-tools): ditto's achieved throughput within 5% of memcaslap's;
#   nginx:     wrk 4.x paced by a Lua delay() hook: throughput within 5% of wrk's, and p50 latency
#              within 20% of wrk's p50 at rates where wrk is not saturated.
# memcaslap cannot be rate-limited (its -P/--tps is a no-op, see validation/bench/README.md), so each
# memcached point runs memcaslap closed-loop at a small concurrency and offers its measured TPS to ditto;
# memcached's own `stats` counters are sampled during every run as a tool-independent witness.
# wrk runs one connection per thread with randomised pauses (so its connections cannot fall into
# lock-step); its measured Requests/sec is the rate offered to ditto, with fixed and Poisson arrivals, on
# the spec's path mix and on the spec's main path alone (the latency check).
# Prints a table with PASS/FAIL per check (and "info" rows), writes out/bench/crosscheck-load.json, and
# exits 1 if a check fails. Takes about 2 minutes 40 seconds.
# Usage: validation/bench/crosscheck-load.sh
#   env: MC_CONCURRENCY="1 2"   memcaslap concurrencies, one memcached point each
#        MC_DURATION=5          seconds per memcached run (ditto adds WARMUP before it)
#        NG_POINTS="8:8:4 16:4:2"  nginx points, connections:mean_pause_ms:jitter_ms (~1k and ~3.7k req/s)
#        NG_MIX_DURATION=5 NG_MIX_REPS=1  path-mix runs per point
#        NG_DURATION=2 NG_REPS=5          single-path runs per point (interleaved repetitions)
#        WARMUP=1               ditto's unmeasured warm-up seconds
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
ditto=$root/target/release/ditto
out=$root/out/bench
MC_CONCURRENCY=${MC_CONCURRENCY:-"1 2"}
MC_DURATION=${MC_DURATION:-5}
NG_POINTS=${NG_POINTS:-"8:8:4 16:4:2"}
NG_DURATION=${NG_DURATION:-2}
NG_REPS=${NG_REPS:-5}
NG_MIX_DURATION=${NG_MIX_DURATION:-5}
NG_MIX_REPS=${NG_MIX_REPS:-1}
WARMUP=${WARMUP:-1}

die() { echo "crosscheck-load: $*" >&2; exit 1; }
for tool in memcaslap wrk python3; do
  command -v "$tool" >/dev/null || die "$tool is missing: run scripts/setup.sh"
done
if [ ! -x "$ditto" ]; then
  echo "crosscheck-load: building ditto (cargo build --release -p ditto-cli)"
  cargo build --quiet --release -p ditto-cli
fi
mkdir -p "$out"

# As root, the load generators and the servers run at nice -10 (both tools alike), which keeps
# background jobs such as compilers from adding their scheduling delays to µs-scale latencies.
nice_cmd=()
if [ "$(id -u)" -eq 0 ]; then nice_cmd=(nice -n -10); fi

work=$(mktemp -d /tmp/crosscheck-load.XXXXXX)
serve_pids=()   # `ditto serve` processes we started
target_pids=()  # the servers they started; each leads its own process group
run_dirs=()     # their run folders
stop_servers() {
  local i sp tp rd n
  for i in "${!serve_pids[@]}"; do
    sp=${serve_pids[$i]}; tp=${target_pids[$i]:-}; rd=${run_dirs[$i]:-}
    kill -TERM "$sp" 2>/dev/null || true
    wait "$sp" 2>/dev/null || true
    # ditto serve exits on SIGTERM without removing its run folder; remove the one it reported.
    case "$rd" in */ditto-*) rm -rf -- "$rd" ;; esac
    [ -n "$tp" ] || continue
    # ditto serve stops its server's process group on SIGTERM; make sure nothing of it is left.
    for n in $(seq 50); do pgrep -g "$tp" >/dev/null || break; sleep 0.1; done
    if pgrep -g "$tp" >/dev/null; then
      echo "crosscheck-load: server group $tp outlived ditto serve; killing it" >&2
      kill -KILL -- "-$tp" 2>/dev/null || true
    fi
  done
  serve_pids=(); target_pids=(); run_dirs=()
}
cleanup() { stop_servers; rm -rf "$work"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
# Helpers: the wrk Lua script and a Python helper (free ports, memcached stats sampling, parsing,
# the report), written into the temporary folder.
cat >"$work/paced.lua" <<'LUA'
-- wrk: paced GETs over a weighted path mix, one pause before every request.
-- CX_PATHS "path:n,path:n,..." (each path n times in the rotation), CX_DELAY_MS mean pause,
-- CX_JITTER_MS: the pause is uniform on [delay - jitter, delay + jitter] whole ms.
local mix = os.getenv("CX_PATHS") or "/:1"
local delay_ms = tonumber(os.getenv("CX_DELAY_MS") or "0")
local jitter_ms = tonumber(os.getenv("CX_JITTER_MS") or "0")
local seq = {}
for p, n in string.gmatch(mix, "([^:,]+):(%d+)") do
  for _ = 1, tonumber(n) do seq[#seq + 1] = p end
end
local next_id = 0
function setup(thread)
  thread:set("thread_id", next_id)
  next_id = next_id + 1
end
local reqs, i = {}, 0
function init(args)
  -- Every thread has its own Lua state: unseeded, all threads would draw the same pauses and
  -- their connections would stay in lock-step, queueing behind each other at the server.
  math.randomseed(os.time() * 1000 + thread_id * 7919)
  for k, p in ipairs(seq) do reqs[k] = wrk.format("GET", p) end
  i = thread_id % #reqs
end
function delay()
  if jitter_ms > 0 then return delay_ms - jitter_ms + math.random(0, 2 * jitter_ms) end
  return delay_ms
end
function request()
  i = i % #reqs + 1
  return reqs[i]
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('CXJSON {"requests":%d,"duration_us":%d,"socket_errors":%d,"status_errors":%d,'
    .. '"timeouts":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean))
end
LUA

cat >"$work/cx.py" <<'PY'
import glob, json, math, os, re, socket, statistics, subprocess, sys, time, tomllib

def freeport():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); print(p)

def spec_paths(spec):
    paths = tomllib.load(open(spec, "rb"))["workload"]["paths"]
    g = 0
    for p in paths: g = math.gcd(g, int(p["weight"]))
    print(",".join(f'{p["path"]}:{int(p["weight"]) // g}' for p in paths))

def single_path(spec, out):
    """Writes a copy of the spec whose workload is only its heaviest path; prints that path."""
    text = open(spec).read()
    paths = tomllib.load(open(spec, "rb"))["workload"]["paths"]
    main = max(paths, key=lambda p: p["weight"])["path"]
    new, n = re.subn(r"(?ms)^paths = \[.*?^\]\n", f'paths = [{{ path = "{main}", weight = 1 }}]\n', text)
    if n != 1: raise SystemExit(f"cannot find the [workload] paths array in {spec}")
    open(out, "w").write(new)
    print(main)

def mc_ops(port):
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(b"stats\r\n"); buf = b""
        while not buf.endswith(b"END\r\n"): buf += s.recv(65536)
    st = dict(l.split()[1:3] for l in buf.decode().splitlines() if l.startswith("STAT "))
    return int(st["cmd_get"]) + int(st["cmd_set"])

def sample(port, t_from, t_to, result, stdout, cmd):
    """Runs cmd and reads memcached's own command counters (cmd_get + cmd_set) before it starts,
    t_from and t_to seconds after, and after it exits: a rate over that window and a whole-run count."""
    start = mc_ops(port)
    t0 = time.monotonic()
    with open(stdout, "w") as f:
        p = subprocess.Popen(cmd, stdout=f)
        time.sleep(max(0.0, t0 + t_from - time.monotonic())); a, ta = mc_ops(port), time.monotonic()
        time.sleep(max(0.0, t0 + t_to - time.monotonic())); b, tb = mc_ops(port), time.monotonic()
        rc = p.wait()
    json.dump({"server_ops_per_s": (b - a) / (tb - ta) if tb - ta > 0.2 else float("nan"), "window_s": tb - ta,
               "server_ops_total": mc_ops(port) - start}, open(result, "w"))
    sys.exit(rc)

def memcaslap(path):
    text = open(path).read()
    m = re.search(r"Run time: ([\d.]+)s Ops: (\d+) TPS: (\d+)", text)
    if not m: raise SystemExit(f"no memcaslap summary in {path}:\n{text}")
    miss = re.search(r"get_misses: (\d+)", text)
    return {"run_time_s": float(m.group(1)), "ops": int(m.group(2)), "tps": float(m.group(3)),
            "get_misses": int(miss.group(1)) if miss else None}

def wrk(path):
    text = open(path).read()
    m = re.search(r"CXJSON (\{.*\})", text)
    if not m: raise SystemExit(f"wrk did not run the Lua script (no CXJSON line) in {path}:\n{text}")
    d = json.loads(m.group(1)); d["rate"] = d["requests"] / (d["duration_us"] / 1e6)
    return d

def ditto(path):
    d = json.load(open(path))
    return {k: d[k] for k in ("offered_rate", "achieved_rate", "duration_s", "requests_scheduled",
                              "requests_completed", "kept_up", "kept_up_problem", "connections", "arrival")} | {
        "errors": d["outcomes"]["errors_total"], "p50_us": d["latency_us"]["p50"],
        "p90_us": d["latency_us"]["p90"], "p99_us": d["latency_us"]["p99"],
        "send_lag_p99_us": d["send_lag_us"]["p99"]}

def check(checks, name, metric, arrival, tool, tv, dv, limit, unit, gating=True, problems=(), notes=()):
    """One comparison. Gating checks decide the exit status; info rows are printed and stored only.
    `problems` (errors) fail a gating check whatever the figures; `notes` are shown only."""
    err = (dv - tv) / tv if tv else float("inf")
    ok = abs(err) <= limit and not problems
    checks.append({"name": name, "metric": metric, "arrival": arrival, "tool": tool, "tool_value": round(tv, 2),
                   "ditto_value": round(dv, 2), "unit": unit, "error_pct": round(100 * err, 2),
                   "limit_pct": 100 * limit, "gating": gating, "pass": ok if gating else None,
                   "problems": list(problems), "notes": list(notes)})

def report(work, out_path, meta_path):
    meta = json.load(open(meta_path))
    checks, runs = [], {"memcached": [], "nginx": []}
    for pdir in sorted(glob.glob(f"{work}/mc/*/")):
        pt = json.load(open(pdir + "point.json"))
        ms = memcaslap(pdir + "memcaslap.txt") | json.load(open(pdir + "memcaslap.server.json"))
        run = pt | {"memcaslap": ms, "ditto": {}}
        name = f"memcached c={pt['concurrency']} @{ms['tps']:.0f}/s"
        for arr in ("fixed", "poisson"):
            d = ditto(pdir + f"ditto-{arr}.json") | json.load(open(pdir + f"ditto-{arr}.server.json"))
            run["ditto"][arr] = d
            probs = [f"ditto: {d['errors']} errors"] if d["errors"] else []
            notes = [] if d["kept_up"] else [f"ditto fell behind: send lag p99 {d['send_lag_p99_us'] / 1000:.1f} ms"]
            check(checks, name, "throughput", arr, "memcaslap", ms["tps"], d["achieved_rate"], 0.05, "ops/s",
                  problems=probs, notes=notes)
            check(checks, name, "throughput vs server counters", arr, "memcached stats",
                  d["server_ops_per_s"], d["achieved_rate"], 0.05, "ops/s", gating=False)
        runs["memcached"].append(run)
    for pdir in sorted(glob.glob(f"{work}/ng/*/")):
        pt = json.load(open(pdir + "point.json"))
        reps = sorted(glob.glob(pdir + "r*/"))
        w = [wrk(r + "wrk.txt") for r in reps]
        wrate = sum(x["requests"] for x in w) / (sum(x["duration_us"] for x in w) / 1e6)
        wp50 = statistics.median(x["p50_us"] for x in w)
        werr = sum(x["socket_errors"] + x["status_errors"] + x["timeouts"] for x in w)
        run = pt | {"wrk": {"rate": wrate, "p50_us_median": wp50, "errors": werr, "reps": w}, "ditto": {}}
        single = pt["workload"] == "single"
        what = pt["paths"].split(":")[0] if single else "mix"
        name = f"nginx {what} {pt['connections']}c @{wrate:.0f}/s"
        for arr in ("fixed", "poisson"):
            ds = [ditto(r + f"ditto-{arr}.json") for r in reps]
            drate = sum(x["achieved_rate"] * x["duration_s"] for x in ds) / sum(x["duration_s"] for x in ds)
            dp50 = statistics.median(x["p50_us"] for x in ds)
            derr = sum(x["errors"] for x in ds)
            behind = sum(1 for x in ds if not x["kept_up"])
            run["ditto"][arr] = {"rate": drate, "p50_us_median": dp50, "errors": derr,
                                 "runs_not_kept_up": behind, "reps": ds}
            probs = ([f"wrk: {werr} errors"] if werr else []) + ([f"ditto: {derr} errors"] if derr else [])
            notes = [f"ditto fell behind in {behind} of {len(ds)} runs"] if behind else []
            check(checks, name, "throughput", arr, "wrk", wrate, drate, 0.05, "req/s", problems=probs, notes=notes)
            # The like-for-like latency comparison: one path whose response both tools take in one read(),
            # and Poisson arrivals, which is what wrk's randomised pauses over many connections add up to.
            # Evenly spaced (fixed) arrivals queue less; on the mix, p50 falls on the boundary between the
            # two most common responses and wrk needs several 8 KiB reads for the larger one.
            gating = single and arr == "poisson"
            why = [] if gating else (["info: evenly spaced arrivals, wrk's are random"] if arr == "fixed"
                                     else ["info: path mix, see README"])
            # A median over runs most of which fell behind would compare queueing in ditto, not the server.
            invalid = [f"ditto fell behind in {behind} of {len(ds)} runs"] if 2 * behind > len(ds) else []
            check(checks, name, f"p50 latency (median of {len(reps)})", arr, "wrk", wp50, dp50, 0.20, "us",
                  gating=gating, problems=probs + (invalid if gating else []),
                  notes=why + (notes if not (gating and invalid) else []))
        runs["nginx"].append(run)
    gating = [c for c in checks if c["gating"]]
    ok = bool(gating) and all(c["pass"] for c in gating)
    meta["load_end"] = os.getloadavg()
    json.dump({"pass": ok, "meta": meta, "checks": checks, "runs": runs}, open(out_path, "w"), indent=2)

    def fmt(v, unit):
        return f"{v:.0f} µs" if unit == "us" else f"{v:.1f}/s"
    print()
    print(f"{'check':<30} {'metric':<29} {'arrival':<8} {'tool':<16} {'tool value':>12} {'ditto':>12} "
          f"{'error':>7} {'limit':>5}  result")
    for c in checks:
        result = ("PASS" if c["pass"] else "FAIL") if c["gating"] else "info"
        extra = c["problems"] + c["notes"]
        print(f"{c['name']:<30} {c['metric']:<29} {c['arrival']:<8} {c['tool']:<16} "
              f"{fmt(c['tool_value'], c['unit']):>12} {fmt(c['ditto_value'], c['unit']):>12} "
              f"{c['error_pct']:>+6.1f}% {c['limit_pct']:>4.0f}%  {result}" + (f"  ({'; '.join(extra)})" if extra else ""))
    for r in runs["memcached"]:
        ms = r["memcaslap"]
        print(f"memcaslap c={r['concurrency']}: counted {ms['ops']} ops in {ms['run_time_s']} s "
              f"({ms['tps']:.0f}/s, get misses {ms['get_misses']}); memcached counted {ms['server_ops_total']} "
              f"over the whole run ({100 * (ms['ops'] - ms['server_ops_total']) / ms['server_ops_total']:+.2f}%)")
    print(f"load average: start {meta['load_start'][0]:.2f}, end {meta['load_end'][0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'PASS' if ok else 'FAIL'}: {sum(c['pass'] for c in gating)}/{len(gating)} checks passed "
          f"({len(checks) - len(gating)} info rows); figures in {out_path}")
    sys.exit(0 if ok else 1)

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "freeport": freeport()
    elif cmd == "spec-paths": spec_paths(args[0])
    elif cmd == "single-path": single_path(args[0], args[1])
    elif cmd == "sample":
        sep = args.index("--")
        port, t_from, t_to, result, stdout = args[:sep]
        sample(int(port), float(t_from), float(t_to), result, stdout, args[sep + 1:])
    elif cmd == "memcaslap-tps": print(memcaslap(args[0])["tps"])
    elif cmd == "wrk-rate": print(f'{wrk(args[0])["rate"]:.1f}')
    elif cmd == "report": report(*args)
    else: raise SystemExit(f"unknown command {cmd}")
PY
cx() { python3 "$work/cx.py" "$@"; }

# Starts `ditto serve --target $1` on a free port; sets $port.
serve() {
  local spec=$1 log=$work/serve-$(basename "$1" .toml) sp tp n
  port=$(cx freeport)
  "$ditto" serve --target "$spec" --port "$port" >"$log.out" 2>"$log.err" &
  sp=$!
  serve_pids+=("$sp"); target_pids+=(""); run_dirs+=("")
  for n in $(seq 300); do
    grep -q '^pid=' "$log.out" 2>/dev/null && break
    kill -0 "$sp" 2>/dev/null || { cat "$log.err" >&2; die "ditto serve --target $spec exited"; }
    sleep 0.1
  done
  tp=$(sed -n 's/^pid=\([0-9]*\).*/\1/p' "$log.out")
  [ -n "$tp" ] || { cat "$log.err" >&2; die "ditto serve --target $spec did not report a pid within 30 s"; }
  target_pids[${#target_pids[@]}-1]=$tp
  run_dirs[${#run_dirs[@]}-1]=$(sed -n 's/.* run_dir=\([^ ]*\).*/\1/p' "$log.out")
  if [ ${#nice_cmd[@]} -gt 0 ]; then renice -n -10 -g "$tp" >/dev/null; fi
  echo "  $(basename "$spec" .toml) serving on 127.0.0.1:$port (pid $tp)"
}

python3 - "$work/meta.json" "$MC_CONCURRENCY" "$NG_POINTS" "$MC_DURATION" "$NG_DURATION" "$NG_REPS" "$WARMUP" <<'PY'
import json, os, sys, time
_, path, mc, ng, mcd, ngd, reps, warm = sys.argv
json.dump({"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "cpus": os.cpu_count(), "load_start": os.getloadavg(),
           "mc_concurrency": mc.split(), "ng_points": ng.split(), "mc_duration_s": float(mcd),
           "ng_duration_s": float(ngd), "ng_reps": int(reps), "ditto_warmup_s": float(warm),
           "niced": os.geteuid() == 0}, open(path, "w"))
PY
read -r load1 _ </proc/loadavg
ncpu=$(nproc)
echo "crosscheck-load: ditto load vs memcaslap (memcached) and wrk (nginx); load average $load1 on $ncpu CPUs"
if python3 -c "import sys; sys.exit(0 if float('$load1') > $ncpu else 1)"; then
  echo "  note: the machine is busy (load $load1 > $ncpu CPUs); latency figures will be noisy"
fi

# ---------------------------------------------------------------------------------------------
# memcached: memcaslap closed-loop at concurrency c (one thread), then ditto at memcaslap's TPS.
echo "memcached:"
printf 'key\n30 30 1\nvalue\n4096 4096 1\ncmd\n0 0.1\n1 0.9\n' >"$work/memcaslap.cfg"
serve targets/memcached.toml
mc_port=$port
ditto_end=$((WARMUP + MC_DURATION))
for c in $MC_CONCURRENCY; do
  d=$work/mc/c$(printf '%03d' "$c"); mkdir -p "$d"
  # Each memcaslap concurrency walks its own window of keys (-w takes only k/M units); c windows
  # of 10/c k keys match the spec's 10,000 keys.
  win=$(( 10 / c > 0 ? 10 / c : 1 ))k
  echo "{\"concurrency\": $c, \"memcaslap_threads\": 1, \"memcaslap_window\": \"$win\"}" >"$d/point.json"
  cx sample "$mc_port" 1 $((MC_DURATION - 1)) "$d/memcaslap.server.json" "$d/memcaslap.txt" -- \
    "${nice_cmd[@]}" memcaslap -s "127.0.0.1:$mc_port" -F "$work/memcaslap.cfg" -t "${MC_DURATION}s" \
    -T 1 -c "$c" -w "$win" 2>"$d/memcaslap.err" || { cat "$d/memcaslap.err" "$d/memcaslap.txt" >&2; die "memcaslap failed"; }
  rate=$(cx memcaslap-tps "$d/memcaslap.txt")
  # ditto is open-loop: its own connection count, enough that one slow response cannot hold up
  # the schedule (ditto's send-lag check), independent of memcaslap's concurrency.
  conns=$(python3 -c "print(max(16, min(64, int($rate / 1000) + 1)))")
  for arrival in fixed poisson; do
    cx sample "$mc_port" $((WARMUP + 1)) $((ditto_end - 1)) "$d/ditto-$arrival.server.json" "$d/ditto-$arrival.log" -- \
      "${nice_cmd[@]}" "$ditto" load --target targets/memcached.toml --addr "127.0.0.1:$mc_port" \
      --rate "$rate" --connections "$conns" --duration "$MC_DURATION" --warmup "$WARMUP" \
      --arrival "$arrival" --json "$d/ditto-$arrival.json" 2>"$d/ditto-$arrival.err" \
      || { cat "$d/ditto-$arrival.err" >&2; die "ditto load failed"; }
  done
  echo "  c=$c: memcaslap $rate ops/s; ditto offered the same over $conns connections (fixed, poisson)"
done
stop_servers

# ---------------------------------------------------------------------------------------------
# nginx: wrk paced by its Lua delay() hook, one connection per thread; ditto at wrk's rate with the
# same connection count. Each point runs two workloads: the spec's path mix (throughput), and a copy of
# the spec reduced to its main path, a response that both tools read in one read() (p50 latency; see
# validation/bench/README.md). Repetitions interleave the tools so both see the same background noise.
echo "nginx:"
serve targets/nginx.toml
ng_port=$port
mix_paths=$(cx spec-paths targets/nginx.toml)
single_path=$(cx single-path targets/nginx.toml "$work/nginx-single.toml")

# run_ng DIR SPEC WRK_PATHS CONNS PAUSE_MS JITTER_MS REPS DURATION
run_ng() {
  local d=$1 spec=$2 paths=$3 conns=$4 delay=$5 jitter=$6 reps=$7 dur=$8 rep r rate arrival
  mkdir -p "$d"
  echo "{\"workload\": \"$(basename "$d" | cut -d- -f3)\", \"connections\": $conns, \"wrk_threads\": $conns, \"pause_ms\": $delay, \"jitter_ms\": $jitter, \"paths\": \"$paths\", \"duration_s\": $dur}" >"$d/point.json"
  for rep in $(seq "$reps"); do
    r=$d/r$rep; mkdir -p "$r"
    CX_PATHS=$paths CX_DELAY_MS=$delay CX_JITTER_MS=$jitter "${nice_cmd[@]}" \
      wrk -t "$conns" -c "$conns" -d "${dur}s" --latency -s "$work/paced.lua" \
      "http://127.0.0.1:$ng_port/" >"$r/wrk.txt" 2>&1 || { cat "$r/wrk.txt" >&2; die "wrk failed"; }
    rate=$(cx wrk-rate "$r/wrk.txt")
    for arrival in fixed poisson; do
      "${nice_cmd[@]}" "$ditto" load --target "$spec" --addr "127.0.0.1:$ng_port" \
        --rate "$rate" --connections "$conns" --duration "$dur" --warmup "$WARMUP" \
        --arrival "$arrival" --seed "$rep" --json "$r/ditto-$arrival.json" >"$r/ditto-$arrival.log" \
        2>"$r/ditto-$arrival.err" \
        || { cat "$r/ditto-$arrival.err" >&2; die "ditto load failed"; }
    done
    echo "  $conns conns, pause ${delay}±${jitter} ms, $paths, run $rep/$reps: wrk $rate req/s; ditto offered the same (fixed, poisson)"
  done
}
for p in $NG_POINTS; do
  IFS=: read -r conns delay jitter <<<"$p"
  base=$work/ng/c$(printf '%03d' "$conns")-d$(printf '%03d' "$delay")
  run_ng "$base-mix" targets/nginx.toml "$mix_paths" "$conns" "$delay" "$jitter" "$NG_MIX_REPS" "$NG_MIX_DURATION"
  run_ng "$base-single" "$work/nginx-single.toml" "$single_path:1" "$conns" "$delay" "$jitter" "$NG_REPS" "$NG_DURATION"
done
stop_servers

cx report "$work" "$out/crosscheck-load.json" "$work/meta.json"
