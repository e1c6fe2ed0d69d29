//! `ditto profile --pid`: attach-mode profiling.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, Result};
use ditto_profile::Profile;
use ditto_profiler::{AttachLoad, AttachOptions, CollectorChoice};

use crate::args::{CollectorFlag, ProfileArgs};
use crate::load::load_spec;

pub fn run(args: ProfileArgs) -> Result<()> {
    if !(args.duration.is_finite() && args.duration > 0.0) {
        anyhow::bail!("--duration must be a positive number of seconds");
    }
    let load = match &args.target {
        Some(path) => {
            let spec = load_spec(path)?;
            let mut level = spec.load.resolve(args.level);
            level.duration_s = args.duration;
            let addr = args
                .addr
                .unwrap_or_else(|| SocketAddr::from((Ipv4Addr::LOCALHOST, spec.server.port)));
            Some(AttachLoad {
                spec,
                level,
                addr,
                seed: args.seed,
            })
        }
        None => None,
    };
    let opts = AttachOptions {
        pid: args.pid,
        duration: Duration::from_secs_f64(args.duration),
        collector: match args.collector {
            CollectorFlag::Auto => CollectorChoice::Auto,
            CollectorFlag::Bpftrace => CollectorChoice::Bpftrace,
            CollectorFlag::Ptrace => CollectorChoice::Ptrace,
        },
        load,
        measure_overhead: args.overhead,
    };
    let result = ditto_profiler::profile_attach(&opts, &mut |m| eprintln!("ditto: {m}"))?;
    if let Some(dir) = args.output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    result.profile.save(&args.output)?;
    if let Some(path) = &args.observations {
        let text = serde_json::to_string_pretty(&result.observations)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    print!("{}", summary(&result.profile));
    eprintln!("ditto: wrote {}", args.output.display());
    if result.profile.conditions.partial.is_some() {
        anyhow::bail!(
            "the target exited during profiling; the partial profile was saved to {}",
            args.output.display()
        );
    }
    Ok(())
}

/// A human summary of a profile: what a user checks first.
pub fn summary(p: &Profile) -> String {
    let mut s = String::new();
    let c = &p.conditions;
    let _ = writeln!(
        s,
        "profile: {} requests in {:.1} s ({:?}, {:?} collector){}",
        c.requests,
        c.duration_s,
        c.requests_source,
        c.collector,
        if c.partial.is_some() {
            " — PARTIAL"
        } else {
            ""
        }
    );
    for g in &p.threads.processes {
        let _ = writeln!(s, "  process group {}: {:?} x{}", g.id, g.role, g.count);
    }
    for cl in &p.threads.clusters {
        let _ = writeln!(
            s,
            "  cluster {} ({}): {:?} x{}, {:?}, triggers {:?}, {:.2} syscalls/request",
            cl.id,
            cl.process,
            cl.role,
            cl.threads,
            cl.lifetime,
            cl.triggers,
            cl.syscalls_per_request
        );
    }
    let n = &p.network.server;
    let _ = writeln!(
        s,
        "  network: {:?}{}, accept {:?}, {} worker{}{}, framing {:?}, {:.0} B in / {:.0} B out per request",
        n.io,
        if n.nonblocking { " (non-blocking)" } else { "" },
        n.accept,
        n.workers,
        if n.workers == 1 { "" } else { "s" },
        if n.multi_process { " (processes)" } else { "" },
        p.network.framing,
        p.network.bytes_in_per_request,
        p.network.bytes_out_per_request
    );
    for cs in p.syscalls.clusters.iter().filter(|c| !c.calls.is_empty()) {
        let top: Vec<String> = cs
            .calls
            .iter()
            .take(6)
            .map(|c| format!("{} {:.3}", c.name, c.per_request))
            .collect();
        let _ = writeln!(s, "  syscalls/request {}: {}", cs.cluster, top.join(", "));
    }
    if let Some(o) = &c.overhead {
        let pct = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:+.1}%", 100.0 * v));
        let _ = writeln!(
            s,
            "  overhead: throughput {}, CPU/request {}, p50 {}",
            pct(o.throughput_loss.map(|v| -v)),
            pct(o.cpu_per_request),
            pct(o.p50_increase)
        );
    }
    for w in &c.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s
}
