//! Launch mode: one command, one complete profile.
//!
//! A service (target spec) is run twice. First natively with the attach collectors under the spec's load
//! level: that run gives the skeleton (threads, network, syscalls, counters, memory) at native speed,
//! where timing-dependent behaviour (batching in epoll, wake-ups) is real. Then under the `ditto-body`
//! Valgrind tool with the same workload at a rate the instrumented server sustains: that run gives the
//! body. The body window starts after warm-up once the trace has gone quiet and ends when it goes quiet
//! again after the load, so it holds exactly the window's requests.
//!
//! A plain program (no spec) runs once under the tool; its whole run is the window and `requests` is
//! what the user says one "request" is (default: the whole run).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;

use ditto_body::report::{build_body, no_names, proc_thread_name, ClusterSlot};
use ditto_body::session::BodySession;
use ditto_body::tool::ToolInstall;
use ditto_load::{LoadConfig, LoadReport};
use ditto_profile::{Profile, ProfileMode};
use ditto_target::{LaunchOptions as TargetLaunch, Level, TargetSpec};

use crate::attach::{profile_attach, AttachLoad, AttachOptions, CollectorChoice};

/// What to launch and how to drive it.
#[derive(Debug, Clone)]
pub struct LaunchOptions {
    /// A service to start from its spec; `None` runs `command` as a plain program.
    pub spec: Option<TargetSpec>,
    /// The program and its arguments (plain-program mode).
    pub command: Vec<String>,
    /// Load level of the native (skeleton) run.
    pub level: Level,
    /// A second native window at this level, for the syscalls' response to load
    /// ([`AttachLoad::second_level`]).
    pub second_level: Option<Level>,
    pub collector: CollectorChoice,
    /// Requests in the traced window (service mode).
    pub body_requests: u64,
    /// Offered rate under the tool (service mode); the server runs tens of times slower there.
    pub body_rate: f64,
    /// Requests served under the tool before the window and not counted (service mode), so that
    /// the window starts from steady-state caches. After only the warm-up, memcached's first read of
    /// each item in a 2,000-request window is a reuse of what the warm-up wrote tens of MiB earlier.
    pub body_warmup_requests: u64,
    /// What the whole run counts as, in requests (plain-program mode).
    pub program_requests: u64,
    /// An earlier launch profile of the same target whose body is kept instead of tracing one
    /// again (service mode): the skeleton is re-taken in seconds, the body trace takes minutes.
    pub body_from: Option<Profile>,
    pub seed: u64,
}

/// A launch profile and how the body window went.
pub struct LaunchResult {
    pub profile: Profile,
    pub body_load: Option<LoadReport>,
    pub body_seconds: f64,
    pub body_words: u64,
}

/// Runs the whole launch-mode profile.
pub fn profile_launch(opts: &LaunchOptions, status: &mut dyn FnMut(&str)) -> Result<LaunchResult> {
    status("building the ditto-body Valgrind tool (cached after the first run)");
    let tool = ditto_body::tool::ensure_tool()?;
    match &opts.spec {
        Some(spec) => launch_service(spec, &tool, opts, status),
        None => launch_program(&tool, opts, status),
    }
}

fn launch_service(
    spec: &TargetSpec,
    tool: &ToolInstall,
    opts: &LaunchOptions,
    status: &mut dyn FnMut(&str),
) -> Result<LaunchResult> {
    // 1. Skeleton: native run with the attach collectors.
    let level = spec.load.resolve(opts.level);
    let (mut native, _) = ditto_measure::start_warm(spec, &TargetLaunch::default(), status)
        .context("starting the target natively")?;
    let attach = profile_attach(
        &AttachOptions {
            pid: native.pid(),
            duration: Duration::from_secs_f64(level.duration_s),
            collector: opts.collector,
            load: Some(AttachLoad {
                spec: spec.clone(),
                level: level.clone(),
                second_level: opts.second_level.map(|l| spec.load.resolve(l)),
                addr: native.addr(),
                seed: opts.seed,
            }),
            measure_overhead: false,
        },
        status,
    );
    // Thread names of each cluster, read while the native threads live: they carry the clustering over
    // to the traced run. They stay in memory; profiles hold no names.
    let mut names_of_cluster: BTreeMap<String, Vec<String>> = BTreeMap::new();
    if let Ok(a) = &attach {
        for (tid, cluster) in crate::analyze::thread_clusters(&a.observations) {
            if let Ok(name) = std::fs::read_to_string(format!("/proc/{tid}/comm")) {
                let names = names_of_cluster.entry(cluster).or_default();
                let name = name.trim_end().to_string();
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    native
        .stop(Duration::from_secs(10))
        .context("stopping the native run")?;
    let mut profile = attach?.profile;
    if let Some(earlier) = &opts.body_from {
        graft_body(&mut profile, earlier)?;
        return Ok(LaunchResult {
            profile,
            body_load: None,
            body_seconds: 0.0,
            body_words: 0,
        });
    }

    // 2. Body: the same workload under the tool.
    let session = BodySession::listen()?;
    let launch = TargetLaunch {
        wrapper: tool_wrapper(tool, session.addr())?,
        ready_timeout: Some(Duration::from_secs(180)),
        ..TargetLaunch::default()
    };
    let (mut traced, _) = ditto_measure::start_warm(spec, &launch, status)
        .context("starting the target under the ditto-body tool")?;
    type Traced = (
        LoadReport,
        Vec<ditto_body::analysis::ProcessCounts>,
        BTreeMap<(u64, u32), String>,
        f64,
    );
    let run = (|| -> Result<Traced> {
        session.wait_connected(Duration::from_secs(30))?;
        status("waiting for the traced server to go idle");
        session.wait_quiet(
            Duration::from_millis(500),
            Duration::from_secs(2),
            Duration::from_secs(300),
        )?;
        let load = |requests: u64, seed: u64| {
            let mut cfg = LoadConfig::new(traced.addr(), spec.workload.clone(), opts.body_rate);
            cfg.connections = level.connections;
            cfg.arrival = level.arrival;
            cfg.warmup = Duration::ZERO;
            cfg.duration = Duration::from_secs_f64(requests as f64 / opts.body_rate);
            cfg.max_requests = Some(requests);
            cfg.request_timeout = Duration::from_secs(30);
            cfg.seed = seed;
            cfg
        };
        if opts.body_warmup_requests > 0 {
            status(&format!(
                "steady-state warm-up: {} requests at {} req/s under Valgrind, not counted",
                opts.body_warmup_requests, opts.body_rate
            ));
            // Another seed: the window's request sequence is the same with or without it.
            let warm = ditto_load::run(
                &load(opts.body_warmup_requests, opts.seed.wrapping_add(1)),
                &mut |_| {},
            )
            .context("the steady-state warm-up load under the ditto-body tool")?;
            if warm.requests_completed == 0 {
                bail!("no request of the steady-state warm-up completed under the ditto-body tool; try a lower --body-rate");
            }
            session.wait_quiet(
                Duration::from_millis(500),
                Duration::from_secs(2),
                Duration::from_secs(300),
            )?;
        }
        session.reset_counts();
        let started = Instant::now();
        let cfg = load(opts.body_requests, opts.seed);
        status(&format!(
            "tracing the body: {} requests at {} req/s under Valgrind",
            opts.body_requests, opts.body_rate
        ));
        let report = ditto_load::run(&cfg, &mut |_| {})?;
        session.wait_quiet(
            Duration::from_millis(500),
            Duration::from_secs(2),
            Duration::from_secs(300),
        )?;
        let counts = session.snapshot();
        let names: BTreeMap<(u64, u32), String> = counts
            .iter()
            .flat_map(|c| c.threads.iter().map(move |t| (c.pid, t.lwp)))
            .filter_map(|(pid, lwp)| proc_thread_name(pid, lwp).map(|n| ((pid, lwp), n)))
            .collect();
        Ok((report, counts, names, started.elapsed().as_secs_f64()))
    })();
    let died = traced.try_exit_status();
    let _ = traced.stop(Duration::from_secs(30));
    // A failed body pass keeps the skeleton: the profile is saved without a body, marked partial.
    let failure = match (&run, died, session.error()) {
        (_, _, Some(e)) => Some(format!("body trace: {e}")),
        (_, Some(status), _) => Some(format!(
            "the target exited under the ditto-body tool ({status}); its log: {}",
            traced.log_tail()
        )),
        (Err(e), None, None) => Some(format!("{e:#}")),
        (Ok((r, ..)), None, None) if r.requests_completed == 0 => Some(
            "no request completed under the ditto-body tool; try a lower --body-rate".to_string(),
        ),
        _ => None,
    };
    if let Some(why) = failure {
        profile.conditions.partial =
            Some(format!("{why}; the profile has the skeleton but no body"));
        return Ok(LaunchResult {
            profile,
            body_load: None,
            body_seconds: 0.0,
            body_words: session.words(),
        });
    }
    let Ok((report, counts, names, seconds)) = run else {
        bail!("body pass failed");
    };
    let requests = report.requests_completed;
    let clusters: Vec<ClusterSlot> = profile
        .threads
        .clusters
        .iter()
        .map(|c| ClusterSlot {
            id: c.id.clone(),
            threads: c.threads,
            cpu_user_per_request: c.cpu_user_s_per_request,
            thread_names: names_of_cluster.get(&c.id).cloned().unwrap_or_default(),
        })
        .collect();
    let mut body = build_body(
        &counts,
        &clusters,
        &|pid, lwp| names.get(&(pid, lwp)).cloned(),
        requests,
    );
    body.requests = requests;
    for cb in &mut body.clusters {
        if let Some(c) = profile.threads.clusters.iter().find(|c| c.id == cb.cluster) {
            cb.syscalls_per_request = c.syscalls_per_request;
        }
    }
    profile.body = Some(body);
    profile.conditions.mode = ProfileMode::Launch;
    let after = match opts.body_warmup_requests {
        0 => String::new(),
        n => format!(" after {n} requests not counted"),
    };
    profile.conditions.warnings.push(format!(
        "body traced over {requests} requests at {:.0} req/s under Valgrind{after}; skeleton from a native run",
        report.achieved_rate
    ));
    Ok(LaunchResult {
        profile,
        body_load: Some(report),
        body_seconds: seconds,
        body_words: session.words(),
    })
}

/// Puts `earlier`'s body into the fresh skeleton `profile`. Refused unless both have the same thread
/// clusters (ids, roles, thread counts): a body's clusters are named by the skeleton's.
fn graft_body(profile: &mut Profile, earlier: &Profile) -> Result<()> {
    let Some(body) = &earlier.body else {
        bail!("the --body-from profile has no body: give a launch-mode profile of this target");
    };
    let shape = |p: &Profile| -> Vec<(String, String, u32)> {
        p.threads
            .clusters
            .iter()
            .map(|c| (c.id.clone(), format!("{:?}", c.role), c.threads))
            .collect()
    };
    if shape(profile) != shape(earlier) {
        bail!(
            "the --body-from profile's thread clusters {:?} differ from this run's {:?}: trace the body again (drop --body-from)",
            shape(earlier),
            shape(profile)
        );
    }
    let mut body = body.clone();
    for cb in &mut body.clusters {
        if let Some(c) = profile.threads.clusters.iter().find(|c| c.id == cb.cluster) {
            cb.syscalls_per_request = c.syscalls_per_request;
        }
    }
    profile.body = Some(body);
    profile.conditions.mode = ProfileMode::Launch;
    profile
        .conditions
        .warnings
        .push(kept_body_warning(&earlier.conditions.warnings));
    Ok(())
}

/// What a profile whose body came from `--body-from` says about it: the earlier profile's own
/// note of its body window, once, however many re-takes the body has been kept through.
fn kept_body_warning(earlier_warnings: &[String]) -> String {
    let traced = earlier_warnings
        .iter()
        .find(|w| w.starts_with("body traced over"))
        .map(|w| {
            let window = w.split(';').next().unwrap_or(w);
            window.split(KEPT_BODY).next().unwrap_or(window).to_string()
        })
        .unwrap_or_else(|| "body".to_string());
    format!("{traced}{KEPT_BODY}; skeleton from a native run")
}

const KEPT_BODY: &str = ", kept from an earlier launch profile (--body-from)";

fn launch_program(
    tool: &ToolInstall,
    opts: &LaunchOptions,
    status: &mut dyn FnMut(&str),
) -> Result<LaunchResult> {
    if opts.command.is_empty() {
        bail!("nothing to launch: give a target spec (--target) or a command after `--`");
    }
    let session = BodySession::listen()?;
    let started = Instant::now();
    status(&format!(
        "running {} under the ditto-body tool",
        opts.command[0]
    ));
    let mut child = tool
        .command(session.addr(), &[], &opts.command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("starting valgrind for {}", opts.command[0]))?;
    let exit = child.wait().context("waiting for the traced program")?;
    session
        .wait_closed(Duration::from_secs(60))
        .context("the body analysis did not finish; the profile would undercount, so none is written (run fewer iterations, or report this)")?;
    if let Some(e) = session.error() {
        bail!("body trace: {e}");
    }
    if session.processes() == 0 {
        bail!(
            "{} did not run under the ditto-body tool (valgrind exited with {exit})",
            opts.command[0]
        );
    }
    let counts = session.snapshot();
    let seconds = started.elapsed().as_secs_f64();
    let mut body = build_body(&counts, &[], &no_names, opts.program_requests);
    body.requests = opts.program_requests;
    let mut profile =
        crate::analyze::empty_profile(ProfileMode::Launch, seconds, opts.program_requests);
    profile.conditions.processes = counts.len() as u32;
    profile.conditions.threads = counts.iter().map(|c| c.threads.len() as u32).sum();
    if !exit.success() {
        profile.conditions.partial = Some(format!(
            "the program exited with {exit}; this profile holds what ran until then"
        ));
    }
    profile.body = Some(body);
    Ok(LaunchResult {
        profile,
        body_load: None,
        body_seconds: seconds,
        body_words: session.words(),
    })
}

/// A copy of the tool's Valgrind folder that any user can read: a target that drops privileges (or is
/// started as its own user) cannot read root's cache folder.
fn shareable_copy(tool: &ToolInstall) -> Result<PathBuf> {
    let name = tool
        .lib_dir
        .parent()
        .and_then(|p| p.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "current".into());
    let dir = std::env::temp_dir().join(format!("ditto-valgrind-tool-{name}"));
    let tool_name = tool
        .tool
        .file_name()
        .context("tool path has no file name")?;
    if dir.join(tool_name).exists() {
        return Ok(dir);
    }
    let staging =
        std::env::temp_dir().join(format!("ditto-valgrind-tool-{name}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    for entry in std::fs::read_dir(&tool.lib_dir)
        .with_context(|| format!("reading {}", tool.lib_dir.display()))?
    {
        let entry = entry?;
        let from = std::fs::canonicalize(entry.path())?;
        let to = staging.join(entry.file_name());
        if entry.file_name() == tool_name {
            std::fs::copy(&from, &to).with_context(|| format!("copying {}", from.display()))?;
        } else {
            std::os::unix::fs::symlink(&from, &to)
                .with_context(|| format!("linking {}", to.display()))?;
        }
    }
    std::fs::set_permissions(&staging, std::fs::Permissions::from_mode(0o755))?;
    if let Err(e) = std::fs::rename(&staging, &dir) {
        let _ = std::fs::remove_dir_all(&staging);
        if !dir.join(tool_name).exists() {
            return Err(e).with_context(|| format!("creating {}", dir.display()));
        }
    }
    Ok(dir)
}

/// The command prefix that runs a target (possibly as another user) under the tool, streaming to `addr`.
pub fn tool_wrapper(tool: &ToolInstall, addr: std::net::SocketAddr) -> Result<Vec<String>> {
    let lib_dir = shareable_copy(tool).context("making the tool readable to the target's user")?;
    Ok(wrapper(&lib_dir, addr))
}

fn wrapper(lib_dir: &Path, addr: std::net::SocketAddr) -> Vec<String> {
    vec![
        "env".into(),
        format!("VALGRIND_LIB={}", lib_dir.display()),
        "valgrind".into(),
        "--tool=ditto-body".into(),
        format!("--ditto-connect={addr}"),
        "-q".into(),
        // Guest threads take turns as on real cores instead of one running until it blocks.
        "--fair-sched=yes".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_kept_through_several_re_takes_is_noted_once() {
        let first = vec![
            "body traced over 1957 requests at 196 req/s under Valgrind; skeleton from a native run"
                .to_string(),
        ];
        let once = kept_body_warning(&first);
        assert_eq!(
            once,
            "body traced over 1957 requests at 196 req/s under Valgrind, kept from an earlier \
             launch profile (--body-from); skeleton from a native run"
        );
        let twice = kept_body_warning(std::slice::from_ref(&once));
        assert_eq!(twice, once);
        assert_eq!(
            kept_body_warning(&[]),
            "body, kept from an earlier launch profile (--body-from); skeleton from a native run"
        );
    }
}
