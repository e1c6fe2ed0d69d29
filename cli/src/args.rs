//! Command-line flags, apart from the work they ask for.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ditto_target::Level;

#[derive(Debug, Parser)]
#[command(
    name = "ditto",
    version,
    about = "ditto clones networked services into shareable synthetic programs",
    long_about = "ditto clones networked services into shareable synthetic programs.\n\n\
                  Targets are described by spec files (docs/target-spec.md); the bundled ones are in targets/."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Drive a target with open-loop load and report throughput and latency.
    #[command(after_help = "Examples:\n  \
        ditto load --target targets/memcached.toml --level medium\n  \
        ditto load --target targets/nginx.toml --rate 3000 --connections 4 --duration 5 --json out/nginx.json\n  \
        ditto load --target targets/memcached.toml --addr 127.0.0.1:11211 --level low   # a server already running\n  \
        ditto load --workload length-prefixed,request_bytes=128 --addr 127.0.0.1:21300 --rate 2000   # a clone\n  \
        ditto load --workload memcached,get_fraction=1 --addr 127.0.0.1:21300 --rate 5000 --connections 8")]
    Load(LoadArgs),
    /// Start a target, warm it, and keep it running until Ctrl-C (e.g. to profile it with --pid).
    #[command(after_help = "Example:\n  ditto serve --target targets/nginx.toml --port 8080")]
    Serve(ServeArgs),
    /// Run several targets under the same load and report them side by side, optionally with simulated
    /// cache and branch counters (one callgrind window each, as `ditto validate` measures them).
    #[command(after_help = "Examples:\n  \
        ditto compare --target targets/pix-baseline.toml --target targets/pix-optimized.toml --level medium\n  \
        ditto compare --target targets/pix-baseline.toml --target targets/pix-optimized.toml --sim --json out/pix.json")]
    Compare(CompareArgs),
    /// Profile a service: attach to a running one (--pid), or launch it (--launch) for the body too.
    #[command(after_help = "Examples:\n  \
        ditto profile --pid 1234 --duration 10 -o profile.json          # whatever traffic arrives\n  \
        ditto profile --pid 1234 --target targets/memcached.toml -o memcached.json   # ditto drives the load\n  \
        ditto profile --pid 1234 --target targets/nginx.toml --overhead -o nginx.json\n  \
        ditto profile --launch --target targets/memcached.toml -o memcached.json   # skeleton + body\n  \
        ditto profile --launch --requests 1000 -o prog.json -- ./prog 1000         # a plain program")]
    Profile(ProfileArgs),
    /// Compare the body of a clone's profile with its original's, field by field (the round-trip check).
    #[command(after_help = "Examples:\n  \
        ditto diff profiles/memcached.json clone-profile.json          # the busiest cluster\n  \
        ditto diff original.json clone.json --cluster c1 --json")]
    Diff(DiffArgs),
    /// Generate a clone repo (runtime configuration + synthetic assembly body) from a profile.
    #[command(after_help = "Examples:\n  \
        ditto generate profiles/memcached.json -o clones/memcached\n  \
        ditto generate profile.json -o clones/svc --seed 7 --knobs knobs.toml\n  \
        ditto generate profiles/memcached.json -o clones/memcached --original /usr/bin/memcached")]
    Generate(GenerateArgs),
    /// Run the original and its clone under the same load at low/medium/high and compare counters,
    /// syscalls, bytes, CPU time, latency and saturation: report.json plus a static HTML dashboard.
    #[command(after_help = crate::validate::EXAMPLES)]
    Validate(crate::validate::ValidateArgs),
    /// Adjust a clone's generator knobs until its CPU counters match the original's (paper §4.5).
    #[command(after_help = crate::tune::EXAMPLES)]
    Tune(crate::tune::TuneArgs),
}

/// Load settings shared by `load` and `compare`; unset ones come from the spec's level.
#[derive(Debug, Args, Clone)]
pub struct LoadFlags {
    /// Load level from the spec.
    #[arg(long, default_value = "medium", value_parser = parse_level)]
    pub level: Level,
    /// Offered requests per second (overrides the level's rate).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Connections (overrides the level's).
    #[arg(long)]
    pub connections: Option<usize>,
    /// Measured seconds (overrides the spec's).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Unmeasured seconds of load before measuring (overrides the spec's).
    #[arg(long)]
    pub warmup: Option<f64>,
    /// Inter-arrival process (overrides the spec's).
    #[arg(long, value_enum)]
    pub arrival: Option<ArrivalFlag>,
    /// Seed of the request mix and Poisson gaps.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds before an unanswered request counts as a timeout.
    #[arg(long, default_value_t = 2.0)]
    pub request_timeout: f64,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ArrivalFlag {
    Fixed,
    Poisson,
}

impl From<ArrivalFlag> for ditto_load::Arrival {
    fn from(a: ArrivalFlag) -> Self {
        match a {
            ArrivalFlag::Fixed => ditto_load::Arrival::Fixed,
            ArrivalFlag::Poisson => ditto_load::Arrival::Poisson,
        }
    }
}

fn parse_level(s: &str) -> Result<Level, String> {
    s.parse()
}

/// `ditto profile --second-level`: a level, or none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecondLevel {
    At(Level),
    None,
}

impl SecondLevel {
    /// The level to run, given the profiled one: unset means low, or medium when profiling at low.
    pub fn resolve(flag: Option<SecondLevel>, profiled: Level) -> Option<Level> {
        match flag {
            Some(SecondLevel::At(l)) if l != profiled => Some(l),
            Some(_) => None,
            None if profiled == Level::Low => Some(Level::Medium),
            None => Some(Level::Low),
        }
    }
}

fn parse_second_level(s: &str) -> Result<SecondLevel, String> {
    if s == "none" {
        return Ok(SecondLevel::None);
    }
    s.parse().map(SecondLevel::At)
}

/// `PROTOCOL[,FIELD=VALUE...]` or a JSON object → a validated workload. Values that read as
/// numbers or booleans are taken as such, anything else as a string; fields that need a list
/// (HTTP paths) need the JSON form.
pub fn parse_workload(s: &str) -> Result<ditto_load::Workload, String> {
    let value = if s.trim_start().starts_with('{') {
        serde_json::from_str(s).map_err(|e| format!("not a workload JSON object: {e}"))?
    } else {
        let mut parts = s.split(',');
        let protocol = parts.next().unwrap_or_default().trim();
        let mut object = serde_json::Map::new();
        object.insert("protocol".into(), protocol.into());
        for part in parts {
            let (key, raw) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}' is not FIELD=VALUE"))?;
            let raw = raw.trim();
            let value = if let Ok(n) = raw.parse::<u64>() {
                n.into()
            } else if let Ok(x) = raw.parse::<f64>() {
                x.into()
            } else if let Ok(b) = raw.parse::<bool>() {
                b.into()
            } else {
                raw.into()
            };
            object.insert(key.trim().to_string(), value);
        }
        serde_json::Value::Object(object)
    };
    let workload: ditto_load::Workload = serde_json::from_value(value).map_err(|e| {
        format!("{e} (protocols: memcached, http, pix-grpc, length-prefixed; fields: docs/target-spec.md)")
    })?;
    workload.validate().map_err(|e| e.to_string())?;
    Ok(workload)
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// Target spec file (see docs/target-spec.md); may be left out with --workload and --addr.
    #[arg(long, value_name = "SPEC", required_unless_present = "workload")]
    pub target: Option<PathBuf>,
    /// Send this workload instead of the spec's: a protocol (memcached, http, pix-grpc,
    /// length-prefixed) with optional `,field=value` pairs, or a JSON object. Without --target it
    /// needs --addr and --rate; connections default to 4, duration 10 s, warm-up 1 s.
    #[arg(long, value_name = "PROTOCOL[,FIELD=VALUE...]", value_parser = parse_workload)]
    pub workload: Option<ditto_load::Workload>,
    #[command(flatten)]
    pub load: LoadFlags,
    /// Load a server already listening here instead of starting the target (workload from the spec).
    #[arg(long, value_name = "HOST:PORT")]
    pub addr: Option<SocketAddr>,
    /// Start the target on this port instead of the spec's.
    #[arg(long, conflicts_with = "addr")]
    pub port: Option<u16>,
    /// With --addr: also warm the running server first.
    #[arg(long, requires = "addr")]
    pub warm: bool,
    /// Permit a non-loopback --addr (only for servers you own).
    #[arg(long)]
    pub allow_non_loopback: bool,
    /// Write the report as JSON here, and the latency HdrHistogram log beside it (same name, `.hlog`).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Target spec file.
    #[arg(long, value_name = "SPEC")]
    pub target: PathBuf,
    /// Listen on this port instead of the spec's.
    #[arg(long)]
    pub port: Option<u16>,
    /// Skip warming.
    #[arg(long)]
    pub no_warm: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Target spec files, two or more; all run under the first spec's load level (rate and connections).
    #[arg(long = "target", value_name = "SPEC", required = true, num_args = 1)]
    pub targets: Vec<PathBuf>,
    #[command(flatten)]
    pub load: LoadFlags,
    /// Also measure instructions per request and cache/branch miss rates under callgrind: a window of
    /// --sim-requests after 1 s of warm-up load, less an idle window as long.
    #[arg(long)]
    pub sim: bool,
    /// With --sim, a second window with the platform's L2 as the simulator's last level: L2 and LLC
    /// miss rates as `ditto tune` and `ditto validate` measure them (twice the simulated time).
    #[arg(long, requires = "sim")]
    pub l2: bool,
    /// Cache geometry for --sim: a bundled platform name (validation/platforms) or a platform file.
    #[arg(long, default_value = "epyc-host")]
    pub platform: String,
    /// Offered rate under callgrind.
    #[arg(long, default_value_t = 100.0)]
    pub sim_rate: f64,
    /// Requests the measured window offers (it lasts --sim-requests / --sim-rate seconds).
    #[arg(long, default_value_t = 1000)]
    pub sim_requests: u64,
    /// Write the side-by-side report as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ProfileArgs {
    /// Process to attach to; its child processes (e.g. nginx's workers) are profiled too.
    #[arg(long, required_unless_present = "launch", conflicts_with = "launch")]
    pub pid: Option<u32>,
    /// Launch mode: start the target (--target SPEC, or the command after `--`) natively for the
    /// skeleton and under the ditto-body Valgrind tool for the body, and write one merged profile.
    #[arg(long)]
    pub launch: bool,
    /// Requests traced under the body tool (launch mode with --target).
    #[arg(long, default_value_t = 2000, requires = "launch")]
    pub body_requests: u64,
    /// Offered rate under the body tool, req/s (launch mode with --target).
    #[arg(long, default_value_t = 200.0, requires = "launch")]
    pub body_rate: f64,
    /// Requests of the same load served under the body tool before the traced window, not counted:
    /// the caches the window starts from hold what a server in steady state holds, not just what
    /// the warm-up wrote (launch mode with --target).
    #[arg(long, default_value_t = 0, requires = "launch")]
    pub body_warmup_requests: u64,
    /// Keep the body of this earlier launch profile of the same target instead of tracing it again:
    /// the skeleton (syscalls, threads, network, the second load) is re-taken natively in seconds
    /// (launch mode with --target; the thread clusters must match).
    #[arg(long, value_name = "PROFILE", requires = "launch")]
    pub body_from: Option<PathBuf>,
    /// What one run of a plain program counts as, in requests (launch mode without --target).
    #[arg(long, default_value_t = 1, requires = "launch")]
    pub requests: u64,
    /// The program and its arguments (launch mode without --target).
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// Target spec: ditto drives this target's load during the window and records its protocol.
    #[arg(long, value_name = "SPEC")]
    pub target: Option<PathBuf>,
    /// Load level from the spec (with --target).
    #[arg(long, default_value = "medium", value_parser = parse_level, requires = "target")]
    pub level: Level,
    /// Address the running target listens on (with --target; default: 127.0.0.1 and the spec's port).
    #[arg(long, value_name = "HOST:PORT", requires = "target")]
    pub addr: Option<SocketAddr>,
    /// With --target: after the profiled window, a second window at this level on the same running
    /// server, whose syscall counts tell the clone how they change with load (a timer thread that
    /// wakes more when busy, an event loop woken more than once per request when requests arrive
    /// alone). `none` skips it. Default: low, or medium when profiling at low.
    #[arg(long, value_name = "LEVEL|none", value_parser = parse_second_level, requires = "target")]
    pub second_level: Option<SecondLevel>,
    /// Seconds to observe (with --target: seconds of load).
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Syscall collector.
    #[arg(long, value_enum, default_value = "auto")]
    pub collector: CollectorFlag,
    /// First run the same load without profiling and record the profiler's overhead (with --target).
    #[arg(long, requires = "target")]
    pub overhead: bool,
    /// Seed of the load's request mix.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also save the raw observations the profile was built from.
    #[arg(long, value_name = "FILE")]
    pub observations: Option<PathBuf>,
    /// Where to write the profile.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CollectorFlag {
    /// bpftrace, or ptrace where BPF is unavailable.
    Auto,
    Bpftrace,
    /// strace-based; slows the target heavily.
    Ptrace,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// The profile to clone (from `ditto profile`).
    pub profile: PathBuf,
    /// Clone directory to write (replaced only if it is a previous clone).
    #[arg(short = 'o', long = "output", value_name = "DIR")]
    pub output: PathBuf,
    /// Seed of every random choice: the same profile, knobs and seed give a byte-identical clone.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Generation knobs (TOML; missing knobs take their defaults; see docs/generator.md).
    #[arg(long, value_name = "FILE")]
    pub knobs: Option<PathBuf>,
    /// Profile of the runtime's empty skeleton (a clone generated with `--empty-body`, profiled with
    /// `ditto profile --launch`): its request workers' instructions per request and their mix, branch,
    /// dependency and access distributions are subtracted from the body's targets, so the body adds only
    /// what the skeleton lacks. Overrides `instructions.skeleton_instructions`; kept in the clone as
    /// `skeleton.json` for `ditto tune`.
    #[arg(long, value_name = "PROFILE")]
    pub skeleton: Option<PathBuf>,
    /// Generate the bare skeleton: no body instructions (to profile the runtime's own cost).
    #[arg(long)]
    pub empty_body: bool,
    /// Build the clone (make) and check that its binary contains nothing of this original executable;
    /// the result is printed and recorded in the clone's README.
    #[arg(long, value_name = "BINARY")]
    pub original: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use ditto_load::{LengthPrefixedWorkload, MemcachedWorkload, Workload};

    #[test]
    fn workload_flag_takes_protocol_and_fields() {
        assert_eq!(
            parse_workload("length-prefixed").unwrap(),
            Workload::LengthPrefixed(LengthPrefixedWorkload::default())
        );
        assert_eq!(
            parse_workload("length-prefixed,request_bytes=128,response_bytes=10").unwrap(),
            Workload::LengthPrefixed(LengthPrefixedWorkload {
                request_bytes: 128,
                response_bytes: Some(10),
            })
        );
        let Workload::Memcached(m) = parse_workload("memcached, get_fraction = 1").unwrap() else {
            panic!("wrong variant")
        };
        assert_eq!(m.get_fraction, 1.0);
        assert_eq!(m.keys, MemcachedWorkload::default().keys);
        let Workload::Http(h) =
            parse_workload(r#"{"protocol":"http","paths":[{"path":"/a"}]}"#).unwrap()
        else {
            panic!("wrong variant")
        };
        assert_eq!(h.paths[0].path, "/a");
    }

    #[test]
    fn workload_flag_refuses_typos_and_bad_values() {
        let err = parse_workload("length-prefixed,request_byte=1").unwrap_err();
        assert!(err.contains("request_byte"), "{err}");
        assert!(parse_workload("redis").is_err());
        assert!(parse_workload("memcached,keys").is_err());
        let err = parse_workload("memcached,get_fraction=2").unwrap_err();
        assert!(err.contains("get_fraction"), "{err}");
    }
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    /// Profile of the original (with a body section).
    pub original: PathBuf,
    /// Profile of the clone (with a body section).
    pub clone: PathBuf,
    /// Cluster to compare (default: the original's cluster with the most instructions per request).
    #[arg(long)]
    pub cluster: Option<String>,
    /// Print the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}
