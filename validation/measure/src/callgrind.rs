//! The simulated backend's measurement window: the server runs under callgrind, with the same cache
//! and branch simulation as cachegrind, and its counters are zeroed when the measured load begins
//! and dumped when it ends (Valgrind's gdbserver, through `vgdb`).
//!
//! Why not cachegrind, which the differential uses: cachegrind 3.19 cannot start and stop counting
//! mid-run, so its per-request figures are the difference of two whole runs, and every run's fixed
//! part (start-up, the protocol's preparation, warm-up) must cancel. It does not, exactly: thread
//! interleaving moves it by a few percent, and where it is large against the measured requests the
//! difference inherits that. A Pix optimized clone's start-up and preparation cost 1.2 million
//! conditional mispredictions against 0.5 million for its measured thousand requests, and the same
//! clone measured twice differed by 11 % in its branch misprediction rate. Callgrind simulates the
//! same caches and the same branch predictor (its `sim.c` and cachegrind's `cg_sim.c` share their
//! model, and both call one predictor), and it can be zeroed and dumped while the server runs: the
//! window holds the measured requests and what the server did per second meanwhile, nothing else.
//!
//! Every process of a run shares one `vgdb` prefix in a folder of its own, so that the zero and the
//! dump reach a forking server's workers (nginx) and no other run's processes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cachegrind::{simulation_args, CachegrindTotals, OutDir};
use crate::platform::Platform;
use crate::MeasureError;

/// Longest wait for one `vgdb` command: a guest blocked in a system call is reached through ptrace
/// after vgdb's own 100 ms; a simulated server busy with a request answers within seconds.
const VGDB_TIMEOUT: Duration = Duration::from_secs(60);

/// The folder of one callgrind run ([`OutDir`]): its output files (`callgrind.out.PID.N`, one per
/// dump and process) and the vgdb FIFOs.
#[derive(Debug)]
pub struct Session {
    dir: OutDir,
}

impl Session {
    pub fn new() -> Result<Session, MeasureError> {
        Ok(Session {
            dir: OutDir::new()?,
        })
    }

    fn prefix(&self) -> String {
        format!("--vgdb-prefix={}", self.dir.path().join("vgdb").display())
    }

    /// Arguments that put a server command under callgrind with `platform`'s geometry, counting
    /// from the start (the first zero opens the window).
    pub fn wrapper(&self, platform: &Platform) -> Vec<String> {
        let mut args = vec!["valgrind".into(), "--tool=callgrind".into()];
        args.extend(simulation_args(platform));
        args.extend([
            // A forked worker (nginx's) has a gdbserver of its own only when children are traced;
            // programs a server executes are still not simulated.
            "--trace-children=yes".into(),
            "--trace-children-skip=*".into(),
            "--vgdb=yes".into(),
            self.prefix(),
            format!(
                "--callgrind-out-file={}",
                self.dir.path().join("callgrind.out.%p").display()
            ),
        ]);
        args
    }

    /// The pids of this run's processes that vgdb can reach.
    fn pids(&self) -> Result<Vec<u32>, MeasureError> {
        // `vgdb -l` exits with 1 after listing; what it lists is the answer.
        let out = run_vgdb_as(&[self.prefix(), "-l".into()], None, false)?;
        let pids: Vec<u32> = out
            .lines()
            .filter_map(|l| l.strip_prefix("use --pid="))
            .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
            .collect();
        if pids.is_empty() {
            return Err(MeasureError::Counters(format!(
                "vgdb found no process of the simulated run under {} (did the server start under callgrind?)",
                self.dir.path().display()
            )));
        }
        Ok(pids)
    }

    /// Sends `command` to every process of the run. vgdb runs as the process's own user: a
    /// server that runs as another user (memcached as memcache, nginx's workers as www-data) never
    /// answered a root vgdb (60 s, by ptrace or by polling), and answers its own user's at once.
    fn command_all(&self, command: &str) -> Result<(), MeasureError> {
        for pid in self.pids()? {
            let user = owner(pid);
            if let Some((uid, gid)) = user {
                self.hand_over(pid, uid, gid)?;
            }
            run_vgdb_as(
                &[self.prefix(), format!("--pid={pid}"), command.into()],
                user,
                true,
            )?;
        }
        Ok(())
    }

    /// Gives process `pid`'s FIFOs and shared-memory file to its user. A worker forked by a root
    /// master creates them before it drops to its own user (nginx's www-data), and then can open
    /// none of them: neither its user's vgdb nor root's got an answer.
    fn hand_over(&self, pid: u32, uid: u32, gid: u32) -> Result<(), MeasureError> {
        use std::os::unix::fs::MetadataExt;
        let tag = format!("-{pid}-by-");
        let entries = std::fs::read_dir(self.dir.path()).map_err(|cause| MeasureError::Read {
            path: self.dir.path().to_path_buf(),
            cause,
        })?;
        for path in entries.flatten().map(|e| e.path()) {
            let ours = path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vgdb-") && n.contains(&tag));
            if !ours {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if (meta.uid(), meta.gid()) != (uid, gid) {
                std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(|cause| {
                    MeasureError::Read {
                        path: path.clone(),
                        cause,
                    }
                })?;
            }
        }
        Ok(())
    }

    /// Zeroes every process's counters: the window opens.
    pub fn zero(&self) -> Result<(), MeasureError> {
        self.command_all("zero")
    }

    /// Dumps every process's counters since the last zero or dump (a dump also zeroes them) and
    /// returns their sum: the window closes.
    pub fn dump(&self) -> Result<CachegrindTotals, MeasureError> {
        let before = self.dump_files()?;
        self.command_all("dump")?;
        let new: Vec<PathBuf> = self
            .dump_files()?
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        if new.is_empty() {
            return Err(MeasureError::CachegrindOutput {
                path: self.dir.path().to_path_buf(),
                message: "callgrind wrote no dump".into(),
            });
        }
        let mut total = CachegrindTotals::default();
        for f in &new {
            total = total.plus(&read_dump(f)?);
        }
        Ok(total)
    }

    /// `callgrind.out.PID.N` files: one per dump and process (the final `callgrind.out.PID`, written
    /// at exit, is not a window).
    fn dump_files(&self) -> Result<BTreeSet<PathBuf>, MeasureError> {
        let entries = std::fs::read_dir(self.dir.path()).map_err(|cause| MeasureError::Read {
            path: self.dir.path().to_path_buf(),
            cause,
        })?;
        Ok(entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(is_dump_name)
            })
            .collect())
    }
}

/// `callgrind.out.<pid>.<part>`.
fn is_dump_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("callgrind.out.") else {
        return false;
    };
    let mut parts = rest.split('.');
    let numeric =
        |s: Option<&str>| s.is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()));
    numeric(parts.next()) && numeric(parts.next()) && parts.next().is_none()
}

/// The real user and group of process `pid`, when it is not this process's user.
fn owner(pid: u32) -> Option<(u32, u32)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let first = |key: &str| -> Option<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let (uid, gid) = (first("Uid:")?, first("Gid:")?);
    // SAFETY: getuid has no preconditions.
    (uid != unsafe { libc::getuid() }).then_some((uid, gid))
}

/// Runs vgdb with `args`, as user and group `as_user` when given, and returns its standard
/// output; an error past [`VGDB_TIMEOUT`] or, with `check_exit`, on a failed exit.
fn run_vgdb_as(
    args: &[String],
    as_user: Option<(u32, u32)>,
    check_exit: bool,
) -> Result<String, MeasureError> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new("vgdb");
    if let Some((uid, gid)) = as_user {
        cmd.uid(uid).gid(gid);
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            MeasureError::Counters(format!(
                "cannot run vgdb ({e}): install valgrind (scripts/setup.sh)"
            ))
        })?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > VGDB_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(MeasureError::Counters(format!(
                    "vgdb {} did not answer within {} s (is ptrace allowed? see /proc/sys/kernel/yama/ptrace_scope)",
                    args.join(" "),
                    VGDB_TIMEOUT.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(MeasureError::Counters(format!("vgdb: {e}"))),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| MeasureError::Counters(format!("vgdb: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if check_exit && !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(MeasureError::Counters(format!(
            "vgdb {} failed ({}): {}",
            args.join(" "),
            out.status,
            stderr.lines().last().unwrap_or("no message")
        )));
    }
    Ok(stdout)
}

/// Reads a dump file (exposed for tests over recorded dumps).
pub fn read_dump(path: &Path) -> Result<CachegrindTotals, MeasureError> {
    let text = std::fs::read_to_string(path).map_err(|cause| MeasureError::Read {
        path: path.to_path_buf(),
        cause,
    })?;
    CachegrindTotals::parse_counts(&text, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_window_dump_reads_as_its_summary() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/callgrind-window.out");
        let t = read_dump(&path).expect("dump reads");
        assert_eq!(t.ir, 168_798_028.0);
        assert_eq!(t.d1mw, 1_118_038.0);
        assert_eq!(t.ilmr, 0.0);
        assert_eq!(t.bcm, 1_673_975.0);
        assert_eq!(t.bim, 420_230.0);
    }

    #[test]
    fn an_idle_windows_unwritten_trailing_zeros_read_as_zeros() {
        // Recorded: the idle window of a Pix optimized clone, whose last event (Bim) was 0.
        let text = "events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim\n\
                    summary: 232 66 38 0 0 0 0 0 0 30 1 6\n";
        let t = CachegrindTotals::parse_counts(text, Path::new("idle")).expect("reads");
        assert_eq!(
            (t.ir, t.bc, t.bcm, t.bi, t.bim),
            (232.0, 30.0, 1.0, 6.0, 0.0)
        );
        let too_many = "events: Ir Bc\nsummary: 1 2 3\n";
        assert!(CachegrindTotals::parse_counts(too_many, Path::new("x")).is_err());
    }

    #[test]
    fn only_numbered_dumps_are_windows() {
        assert!(is_dump_name("callgrind.out.23657.12"));
        assert!(!is_dump_name("callgrind.out.23657"));
        assert!(!is_dump_name("callgrind.out.23657.1.tmp"));
        assert!(!is_dump_name("callgrind.out.x.1"));
        assert!(!is_dump_name(
            "vgdb-pipe-shared-mem-vgdb-23657-by-root-on-host"
        ));
    }
}
