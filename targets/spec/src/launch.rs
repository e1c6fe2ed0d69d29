//! Starting a target from its spec and stopping it again, whatever happens in between.
//!
//! Every target runs in a process group of its own, so that stopping it reaches all of its processes
//! (nginx's master and workers, a Valgrind wrapper and its guest). Three layers make sure nothing is left
//! behind: `RunningTarget::stop`/`Drop` for the normal path, a registry of live groups that the CLI's
//! signal handler empties on Ctrl-C, and `PR_SET_PDEATHSIG` for the case where ditto itself is killed.

use std::ffi::CString;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::spec::{Placeholders, TargetSpec};
use crate::SpecError;

/// A target that is running now: its process group and the run folder to remove (unless kept).
struct Live {
    pgid: i32,
    run_dir: Option<PathBuf>,
}

/// Targets that are running now; see [`kill_all_running`].
static LIVE: Mutex<Vec<Live>> = Mutex::new(Vec::new());

/// Kills every target this process started and has not stopped yet, and removes their run folders.
/// For the CLI's signal-handling thread, which exits right after (destructors will not run); not for an
/// async signal handler itself.
pub fn kill_all_running() {
    let live = match LIVE.lock() {
        Ok(mut g) => std::mem::take(&mut *g),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    };
    for l in &live {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe {
            libc::kill(-l.pgid, libc::SIGKILL);
        }
    }
    for l in live {
        wait_group_gone(l.pgid, Duration::from_secs(2));
        if let Some(dir) = l.run_dir {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

fn register(pgid: i32, run_dir: Option<PathBuf>) {
    if let Ok(mut g) = LIVE.lock() {
        g.push(Live { pgid, run_dir });
    }
}

fn unregister(pgid: i32) {
    if let Ok(mut g) = LIVE.lock() {
        g.retain(|l| l.pgid != pgid);
    }
}

/// How to launch a target beyond what its spec says.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// Listen on this port instead of the spec's.
    pub port: Option<u16>,
    /// Programs and arguments put in front of the server command (e.g. `valgrind --tool=cachegrind …`).
    pub wrapper: Vec<String>,
    /// Keep the run folder (config, logs, tool output) after stop; otherwise it is removed.
    pub keep_run_dir: bool,
    /// Skip the spec's build step (the caller built already).
    pub skip_build: bool,
    /// Wait this long for the port instead of the spec's `ready_timeout_s` (a simulated server starts slowly).
    pub ready_timeout: Option<Duration>,
}

/// A target process that is up and accepting connections.
pub struct RunningTarget {
    child: Option<Child>,
    pgid: i32,
    addr: SocketAddr,
    run_dir: PathBuf,
    keep_run_dir: bool,
    log_path: PathBuf,
    name: String,
}

impl std::fmt::Debug for RunningTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningTarget")
            .field("name", &self.name)
            .field("pid", &self.pgid)
            .field("addr", &self.addr)
            .finish()
    }
}

impl RunningTarget {
    /// Builds (if the spec says how), renders files, starts the server and waits until its port accepts.
    pub fn start(spec: &TargetSpec, opts: &LaunchOptions) -> Result<RunningTarget, SpecError> {
        let port = opts.port.unwrap_or(spec.server.port);
        let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
        if TcpListener::bind(addr).is_err() {
            return Err(SpecError::PortBusy { port });
        }
        let user = spec.server.user.as_deref().map(lookup_user).transpose()?;
        let run_dir = make_run_dir(&spec.name, user.as_ref())?;
        let vars = Placeholders {
            port,
            run_dir: run_dir.clone(),
            spec_dir: spec.spec_dir.clone(),
        };
        if !opts.skip_build {
            if let Some(build) = &spec.server.build {
                run_build(build, &vars, &spec.spec_dir)?;
            }
        }
        for file in &spec.server.files {
            let template = spec.spec_dir.join(&file.template);
            let text = fs::read_to_string(&template).map_err(|cause| SpecError::Read {
                path: template.clone(),
                cause,
            })?;
            let dest = run_dir.join(&file.path);
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent).map_err(|e| SpecError::io("create", parent, e))?;
            }
            fs::write(&dest, vars.expand(&text)).map_err(|e| SpecError::io("write", &dest, e))?;
        }

        for c in &spec.server.copies {
            copy_tree(&spec.spec_dir.join(&c.from), &run_dir.join(&c.to))?;
        }

        let argv: Vec<String> = opts
            .wrapper
            .iter()
            .cloned()
            .chain(spec.server.command.iter().map(|a| vars.expand(a)))
            .collect();
        let log_path = run_dir.join("target.log");
        let log = fs::File::create(&log_path).map_err(|e| SpecError::io("create", &log_path, e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| SpecError::io("open", &log_path, e))?;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..])
            .current_dir(&run_dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0);
        for (k, v) in &spec.server.env {
            cmd.env(k, vars.expand(v));
        }
        if let Some(u) = &user {
            cmd.uid(u.uid).gid(u.gid);
        }
        let nofile = spec.server.nofile;
        // SAFETY: prctl and setrlimit are async-signal-safe; the closure allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                );
                if let Some(n) = nofile {
                    let lim = libc::rlimit {
                        rlim_cur: n as libc::rlim_t,
                        rlim_max: n as libc::rlim_t,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|cause| SpecError::Spawn {
            program: argv[0].clone(),
            cause,
        })?;
        let pgid = child.id() as i32;
        register(pgid, (!opts.keep_run_dir).then(|| run_dir.clone()));
        let mut target = RunningTarget {
            child: Some(child),
            pgid,
            addr,
            run_dir,
            keep_run_dir: opts.keep_run_dir,
            log_path,
            name: spec.name.clone(),
        };
        let ready_timeout = opts
            .ready_timeout
            .unwrap_or(Duration::from_secs_f64(spec.server.ready_timeout_s));
        target.wait_ready(ready_timeout)?;
        Ok(target)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<(), SpecError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_exit_status() {
                return Err(SpecError::DiedAtStart {
                    name: self.name.clone(),
                    status: status.to_string(),
                    log_tail: self.log_tail(),
                });
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(SpecError::NotReady {
                    name: self.name.clone(),
                    addr: self.addr,
                    seconds: timeout.as_secs_f64(),
                    log_tail: self.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// PID of the process ditto started (the group leader: nginx's master, or the Valgrind-wrapped server).
    pub fn pid(&self) -> u32 {
        self.pgid as u32
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Folder holding rendered files, the server's log and any tool output.
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// `Some(status)` once the server has exited.
    pub fn try_exit_status(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// The last lines the server printed, for error messages.
    pub fn log_tail(&self) -> String {
        read_tail(&self.log_path, 800)
    }

    /// Asks the whole process group to exit (SIGTERM), waits up to `grace`, then kills what is left.
    /// Returns the exit status of the process ditto started. The run folder stays until the value is
    /// dropped, so tool output written at exit can still be read.
    pub fn stop(&mut self, grace: Duration) -> Result<ExitStatus, SpecError> {
        let Some(mut child) = self.child.take() else {
            return Err(SpecError::AlreadyStopped);
        };
        // SAFETY: signals a process group we created; no memory is touched.
        unsafe {
            libc::kill(-self.pgid, libc::SIGTERM);
        }
        let deadline = Instant::now() + grace;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                _ => {
                    // SAFETY: as above.
                    unsafe {
                        libc::kill(-self.pgid, libc::SIGKILL);
                    }
                    break child
                        .wait()
                        .map_err(|e| SpecError::io("wait for", &self.log_path, e))?;
                }
            }
        };
        // Workers of a multi-process server may outlive their master by a moment.
        wait_group_gone(self.pgid, grace);
        unregister(self.pgid);
        Ok(status)
    }
}

impl Drop for RunningTarget {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.stop(Duration::from_secs(3));
        }
        if !self.keep_run_dir {
            let _ = fs::remove_dir_all(&self.run_dir);
        }
    }
}

/// Waits until no process of the group is left, killing stragglers after `grace`.
fn wait_group_gone(pgid: i32, grace: Duration) {
    let deadline = Instant::now() + grace;
    loop {
        // SAFETY: signal 0 only checks for existence.
        let alive = unsafe { libc::kill(-pgid, 0) } == 0;
        if !alive {
            return;
        }
        if Instant::now() >= deadline {
            // SAFETY: as above.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(50));
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct User {
    uid: u32,
    gid: u32,
}

fn lookup_user(name: &str) -> Result<User, SpecError> {
    let c_name = CString::new(name).map_err(|_| SpecError::NoSuchUser(name.to_string()))?;
    // SAFETY: getpwnam returns a pointer into static storage or null; we copy the two ids out at once and
    // ditto resolves users from one thread at a time.
    let pw = unsafe { libc::getpwnam(c_name.as_ptr()) };
    if pw.is_null() {
        return Err(SpecError::NoSuchUser(name.to_string()));
    }
    // SAFETY: pw is non-null and points to a valid passwd record.
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    Ok(User { uid, gid })
}

fn make_run_dir(name: &str, user: Option<&User>) -> Result<PathBuf, SpecError> {
    let base = std::env::temp_dir();
    let dir = tempfile::Builder::new()
        .prefix(&format!("ditto-{name}-"))
        .tempdir_in(&base)
        .map_err(|e| SpecError::io("create a run folder in", &base, e))?
        .keep();
    // The server may run as another user and must be able to write its own files (pid, logs, tool output).
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755))
        .map_err(|e| SpecError::io("chmod", &dir, e))?;
    if let Some(u) = user {
        std::os::unix::fs::chown(&dir, Some(u.uid), Some(u.gid))
            .map_err(|e| SpecError::io("chown", &dir, e))?;
    }
    Ok(dir)
}

/// Copies a folder recursively; files become world-readable and folders world-traversable.
fn copy_tree(from: &Path, to: &Path) -> Result<(), SpecError> {
    fs::create_dir_all(to).map_err(|e| SpecError::io("create", to, e))?;
    fs::set_permissions(to, fs::Permissions::from_mode(0o755))
        .map_err(|e| SpecError::io("chmod", to, e))?;
    let entries = fs::read_dir(from).map_err(|e| SpecError::io("read", from, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| SpecError::io("read", from, e))?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| SpecError::io("read", &src, e))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            fs::copy(&src, &dst).map_err(|e| SpecError::io("copy", &src, e))?;
            fs::set_permissions(&dst, fs::Permissions::from_mode(0o644))
                .map_err(|e| SpecError::io("chmod", &dst, e))?;
        }
    }
    Ok(())
}

fn run_build(build: &[String], vars: &Placeholders, spec_dir: &Path) -> Result<(), SpecError> {
    let argv: Vec<String> = build.iter().map(|a| vars.expand(a)).collect();
    let output = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(spec_dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|cause| SpecError::Spawn {
            program: argv[0].clone(),
            cause,
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .lines()
            .rev()
            .take(8)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(SpecError::BuildFailed {
            command: argv.join(" "),
            tail,
        });
    }
    Ok(())
}

fn read_tail(path: &Path, max: u64) -> String {
    let Ok(mut f) = fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(max)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).trim().to_string()
}
