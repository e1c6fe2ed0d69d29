//! `ditto profile`: attach mode (`--pid`) and launch mode (`--launch`).

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, Result};
use ditto_profile::Profile;
use ditto_profiler::{AttachLoad, AttachOptions, CollectorChoice};

use crate::args::{CollectorFlag, ProfileArgs, SecondLevel};
use crate::load::load_spec;

pub fn run(args: ProfileArgs) -> Result<()> {
    if args.launch {
        return run_launch(args);
    }
    let Some(pid) = args.pid else {
        anyhow::bail!("give --pid PID to attach, or --launch to start the target");
    };
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
            let second_level = SecondLevel::resolve(args.second_level, args.level).map(|l| {
                let mut second = spec.load.resolve(l);
                second.duration_s = args.duration;
                second
            });
            Some(AttachLoad {
                spec,
                level,
                second_level,
                addr,
                seed: args.seed,
            })
        }
        None => None,
    };
    let opts = AttachOptions {
        pid,
        duration: Duration::from_secs_f64(args.duration),
        collector: collector(args.collector),
        load,
        measure_overhead: args.overhead,
    };
    let result = ditto_profiler::profile_attach(&opts, &mut |m| eprintln!("ditto: {m}"))?;
    save(&result.profile, &args.output)?;
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

fn collector(flag: CollectorFlag) -> CollectorChoice {
    match flag {
        CollectorFlag::Auto => CollectorChoice::Auto,
        CollectorFlag::Bpftrace => CollectorChoice::Bpftrace,
        CollectorFlag::Ptrace => CollectorChoice::Ptrace,
    }
}

fn save(profile: &Profile, output: &std::path::Path) -> Result<()> {
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    profile.save(output)?;
    Ok(())
}

/// `ditto profile --launch`: skeleton natively, body under the ditto-body tool, one profile.
fn run_launch(args: ProfileArgs) -> Result<()> {
    if !(args.body_rate.is_finite() && args.body_rate > 0.0) {
        anyhow::bail!("--body-rate must be a positive number of requests per second");
    }
    if args.body_requests == 0 || args.requests == 0 {
        anyhow::bail!("--body-requests and --requests must be at least 1");
    }
    let spec = args.target.as_deref().map(load_spec).transpose()?;
    if spec.is_some() && !args.command.is_empty() {
        anyhow::bail!("give either --target SPEC or a command after `--`, not both");
    }
    if spec.is_none() && args.body_warmup_requests > 0 {
        anyhow::bail!(
            "--body-warmup-requests needs --target SPEC: a plain program's whole run is the window"
        );
    }
    if spec.is_none() && args.body_from.is_some() {
        anyhow::bail!("--body-from needs --target SPEC");
    }
    let body_from = args.body_from.as_deref().map(Profile::load).transpose()?;
    let opts = ditto_profiler::launch::LaunchOptions {
        spec,
        body_from,
        command: args.command.clone(),
        level: args.level,
        second_level: SecondLevel::resolve(args.second_level, args.level),
        collector: collector(args.collector),
        body_requests: args.body_requests,
        body_rate: args.body_rate,
        body_warmup_requests: args.body_warmup_requests,
        program_requests: args.requests,
        seed: args.seed,
    };
    let result = ditto_profiler::launch::profile_launch(&opts, &mut |m| eprintln!("ditto: {m}"))?;
    save(&result.profile, &args.output)?;
    print!("{}", summary(&result.profile));
    let words = result.body_words as f64;
    if result.body_load.is_some() {
        eprintln!(
            "ditto: body pass {:.1} s, {:.1} M trace words ({:.1} M/s)",
            result.body_seconds,
            words / 1e6,
            words / 1e6 / result.body_seconds.max(1e-9)
        );
    }
    eprintln!("ditto: wrote {}", args.output.display());
    if let Some(p) = &result.profile.conditions.partial {
        anyhow::bail!(
            "{p}; the partial profile was saved to {}",
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
    if let Some(b) = &p.body {
        for cb in &b.clusters {
            let share = |class: &str| -> f64 {
                cb.instruction_mix
                    .iter()
                    .filter(|m| m.class == class)
                    .map(|m| m.share)
                    .sum()
            };
            let hit = |curve: &ditto_profile::HitCurve, size: u64| {
                curve
                    .points
                    .iter()
                    .find(|p| p.size == size)
                    .map_or("-".into(), |p| format!("{:.1}%", 100.0 * p.hit_rate))
            };
            let _ = writeln!(
                s,
                "  body {}: {:.0} instructions/request, {:.2} B/instruction, mov {:.0}% alu {:.0}% branch {:.0}%, \
                 {:.1} cond. branches/request; L1-size (32 KiB) hit: I {} D {}",
                cb.cluster,
                cb.instructions_per_request,
                cb.mean_instruction_bytes,
                100.0 * share("mov"),
                100.0 * share("alu"),
                100.0 * share("branch"),
                cb.branches.per_request,
                hit(&cb.instruction_working_set, 32 << 10),
                hit(&cb.data_working_set, 32 << 10),
            );
        }
    }
    for w in &c.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s
}
