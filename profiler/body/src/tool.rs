//! Building and running the `ditto-body` Valgrind tool (`tool/ditto_body.c`, stream format in
//! docs/body-trace.md).
//!
//! The tool ships as C source inside this crate and is compiled on first use against Debian's
//! `valgrind` package, because Valgrind tools are static binaries tied to the exact Valgrind build
//! they run under: shipping a binary would break on the next Valgrind update. The build is cached
//! under `$XDG_CACHE_HOME/ditto/valgrind-tool/<hash>/` (fallback `$HOME/.cache`, then the temp
//! directory), keyed by a hash of the source, the flags and the identity of the Valgrind archives,
//! so an edited tool or an upgraded Valgrind gets a fresh build and nothing else rebuilds.

use std::ffi::OsStr;
use std::fs;
use std::io::ErrorKind;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};

/// The tool's C source.
pub const TOOL_SOURCE: &str = include_str!("../tool/ditto_body.c");

/// The name Valgrind looks up for `--tool=ditto-body` on this platform.
pub const TOOL_BINARY: &str = "ditto-body-amd64-linux";

const VALGRIND_INCLUDE: &str = "/usr/include/valgrind";
const VALGRIND_ARCHIVES: &str = "/usr/lib/x86_64-linux-gnu/valgrind";
const VALGRIND_LIBEXEC: &str = "/usr/libexec/valgrind";
const ARCHIVES: [&str; 3] = [
    "libcoregrind-amd64-linux.a",
    "libvex-amd64-linux.a",
    "libgcc-sup-amd64-linux.a",
];

/// Compile flags: the ones Valgrind's own build uses for amd64 tools that matter out of tree.
const CFLAGS: &[&str] = &[
    "-I/usr/include/valgrind",
    "-DVGA_amd64=1",
    "-DVGO_linux=1",
    "-DVGP_amd64_linux=1",
    "-DVGPV_amd64_linux_vanilla=1",
    "-fno-stack-protector",
    "-fno-pie",
    "-O2",
    "-Wall",
];

/// Link flags: a static binary at Valgrind's tool load address, with Valgrind's own startup code.
const LDFLAGS: &[&str] = &[
    "-static",
    "-nodefaultlibs",
    "-nostartfiles",
    "-u",
    "_start",
    "-Wl,-Ttext-segment=0x58000000",
];

/// A built tool, ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolInstall {
    /// The folder to pass as `VALGRIND_LIB`: links to every file of Valgrind's own lib folder, plus
    /// the tool.
    pub lib_dir: PathBuf,
    /// The tool binary.
    pub tool: PathBuf,
}

impl ToolInstall {
    /// `valgrind --tool=ditto-body --ditto-connect=ADDR -q EXTRA... -- PROGRAM...` with
    /// `VALGRIND_LIB` set. The tool speaks IPv4 only (the analyzer listens on loopback); an IPv6
    /// `connect` makes the tool exit at startup with a message saying so.
    pub fn command(
        &self,
        connect: SocketAddr,
        extra_valgrind_args: &[String],
        program: &[String],
    ) -> Command {
        let mut cmd = Command::new("valgrind");
        cmd.env("VALGRIND_LIB", &self.lib_dir)
            .arg("--tool=ditto-body")
            .arg(format!("--ditto-connect={connect}"))
            .arg("-q")
            .args(extra_valgrind_args)
            .arg("--")
            .args(program);
        cmd
    }
}

/// Builds the tool unless the cache already holds this exact build, and returns where it is.
/// Safe to call from several processes at once: each builds in a private folder and renames it
/// into place, and the first rename wins.
pub fn ensure_tool() -> Result<ToolInstall> {
    let mut tried = Vec::new();
    for root in cache_roots() {
        match fs::create_dir_all(&root) {
            Ok(()) => return ensure_tool_in(&root),
            Err(e) => tried.push(format!("{}: {e}", root.display())),
        }
    }
    bail!(
        "no writable cache folder for the ditto-body valgrind tool ({}); set XDG_CACHE_HOME to a writable folder",
        tried.join("; ")
    )
}

/// [`ensure_tool`] with an explicit cache folder (the build goes into `cache_root/<hash>/`).
pub fn ensure_tool_in(cache_root: &Path) -> Result<ToolInstall> {
    check_valgrind()?;
    let key = build_key()?;
    let dir = cache_root.join(format!("{key:016x}"));
    let install = install_in(&dir);
    if install.is_complete() {
        return Ok(install);
    }
    check_gcc()?;
    fs::create_dir_all(cache_root)
        .with_context(|| format!("creating the tool cache folder {}", cache_root.display()))?;
    let staging = unique_staging_dir(cache_root)?;
    let built = build_into(&staging);
    if let Err(e) = built {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    if dir.exists() && !install.is_complete() {
        // A damaged earlier build (parts removed by hand): replace it.
        let _ = fs::remove_dir_all(&dir);
    }
    match fs::rename(&staging, &dir) {
        Ok(()) => Ok(install),
        Err(e) => {
            // Another process finished the same build first: its copy is identical.
            let _ = fs::remove_dir_all(&staging);
            if install.is_complete() {
                Ok(install)
            } else {
                Err(anyhow!(e)).with_context(|| {
                    format!("moving the built valgrind tool into {}", dir.display())
                })
            }
        }
    }
}

impl ToolInstall {
    /// The folder is renamed into place only once complete, so this only fails if someone removed
    /// parts of it since.
    fn is_complete(&self) -> bool {
        self.tool.is_file() && self.lib_dir.join(TOOL_BINARY).is_file()
    }
}

fn install_in(dir: &Path) -> ToolInstall {
    ToolInstall {
        lib_dir: dir.join("lib"),
        tool: dir.join(TOOL_BINARY),
    }
}

fn cache_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        roots.push(PathBuf::from(x).join("ditto/valgrind-tool"));
    }
    if let Some(h) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        roots.push(PathBuf::from(h).join(".cache/ditto/valgrind-tool"));
    }
    // Per user, so one user's build is never run by another.
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    roots.push(std::env::temp_dir().join(format!("ditto-{uid}/valgrind-tool")));
    roots
}

fn check_valgrind() -> Result<()> {
    let header = Path::new(VALGRIND_INCLUDE).join("pub_tool_basics.h");
    if !header.is_file() {
        bail!(
            "valgrind tool headers not found ({}): install the Debian package `valgrind`",
            header.display()
        );
    }
    for a in ARCHIVES {
        let p = Path::new(VALGRIND_ARCHIVES).join(a);
        if !p.is_file() {
            bail!(
                "valgrind tool library not found ({}): install the Debian package `valgrind`",
                p.display()
            );
        }
    }
    if !Path::new(VALGRIND_LIBEXEC).is_dir() {
        bail!("valgrind's lib folder {VALGRIND_LIBEXEC} not found: install the Debian package `valgrind`");
    }
    Ok(())
}

/// Only needed when the cache does not hold the build yet.
fn check_gcc() -> Result<()> {
    match Command::new("gcc").arg("--version").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => bail!(
            "`gcc --version` failed ({}): install the Debian package `gcc`",
            o.status
        ),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            bail!("gcc not found (needed to build the ditto-body valgrind tool): install the Debian package `gcc`")
        }
        Err(e) => Err(anyhow!(e)).context("running `gcc --version`"),
    }
}

/// 64-bit FNV-1a. Written out because std's hashers are not stable across Rust versions, and the
/// key names a folder that must survive toolchain updates.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The cache key: source, flags, and size and modification time of the Valgrind archives (so a
/// Valgrind upgrade, which changes the core the tool links against, forces a rebuild).
fn build_key() -> Result<u64> {
    let mut h = 0xcbf2_9ce4_8422_2325;
    h = fnv1a(h, TOOL_SOURCE.as_bytes());
    for f in CFLAGS.iter().chain(LDFLAGS) {
        h = fnv1a(h, f.as_bytes());
        h = fnv1a(h, &[0]);
    }
    for a in ARCHIVES {
        let p = Path::new(VALGRIND_ARCHIVES).join(a);
        let m = fs::metadata(&p).with_context(|| format!("reading {}", p.display()))?;
        h = fnv1a(h, &m.len().to_le_bytes());
        h = fnv1a(h, &m.mtime().to_le_bytes());
    }
    Ok(h)
}

fn unique_staging_dir(root: &Path) -> Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = root.join(format!(
        ".build-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn build_into(dir: &Path) -> Result<()> {
    let src = dir.join("ditto_body.c");
    fs::write(&src, TOOL_SOURCE).with_context(|| format!("writing {}", src.display()))?;
    let obj = dir.join("ditto_body.o");
    run_gcc(
        "compiling",
        Command::new("gcc")
            .args(CFLAGS)
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&obj),
    )?;
    let tool = dir.join(TOOL_BINARY);
    let mut link = Command::new("gcc");
    link.args(LDFLAGS).arg("-o").arg(&tool).arg(&obj);
    for a in ARCHIVES {
        link.arg(Path::new(VALGRIND_ARCHIVES).join(a));
    }
    link.arg("-lgcc");
    run_gcc("linking", &mut link)?;

    // VALGRIND_LIB replaces Valgrind's lib folder entirely (the launcher looks up the tool there
    // and the core looks up its preload objects and gdbserver files there), so it must hold
    // everything the stock folder holds.
    let lib = dir.join("lib");
    fs::create_dir(&lib).with_context(|| format!("creating {}", lib.display()))?;
    let entries =
        fs::read_dir(VALGRIND_LIBEXEC).with_context(|| format!("listing {VALGRIND_LIBEXEC}"))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {VALGRIND_LIBEXEC}"))?;
        let name = entry.file_name();
        if name.as_os_str() == OsStr::new(TOOL_BINARY) {
            continue;
        }
        std::os::unix::fs::symlink(entry.path(), lib.join(&name)).with_context(|| {
            format!("linking {} into {}", entry.path().display(), lib.display())
        })?;
    }
    // Relative, so the link stays valid after the folder is renamed into place.
    std::os::unix::fs::symlink(Path::new("..").join(TOOL_BINARY), lib.join(TOOL_BINARY))
        .with_context(|| format!("linking the tool into {}", lib.display()))?;
    let _ = fs::remove_file(&obj);
    Ok(())
}

fn run_gcc(what: &str, cmd: &mut Command) -> Result<()> {
    let out = match cmd.output() {
        Ok(o) => o,
        Err(e) if e.kind() == ErrorKind::NotFound => bail!(
            "gcc not found (needed to build the ditto-body valgrind tool): install the Debian package `gcc`"
        ),
        Err(e) => return Err(anyhow!(e)).context(format!("running gcc ({what} the valgrind tool)")),
    };
    if out.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first = stderr
        .lines()
        .find(|l| l.contains("error"))
        .or_else(|| stderr.lines().next())
        .unwrap_or("no output");
    bail!(
        "{what} the ditto-body valgrind tool failed ({}): {first}; check that the Debian packages `valgrind` and `gcc` are installed and match",
        out.status
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a(0xcbf2_9ce4_8422_2325, b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(0xcbf2_9ce4_8422_2325, b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            fnv1a(0xcbf2_9ce4_8422_2325, b"foobar"),
            0x8594_4171_f739_67e8
        );
    }

    #[test]
    fn the_command_names_the_tool_and_the_analyzer() {
        let install = ToolInstall {
            lib_dir: PathBuf::from("/x/lib"),
            tool: PathBuf::from("/x/tool"),
        };
        let cmd = install.command(
            "127.0.0.1:7000".parse().expect("literal address"),
            &["--fair-sched=yes".to_string()],
            &["/bin/true".to_string(), "-x".to_string()],
        );
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--tool=ditto-body",
                "--ditto-connect=127.0.0.1:7000",
                "-q",
                "--fair-sched=yes",
                "--",
                "/bin/true",
                "-x"
            ]
        );
        let env: Vec<_> = cmd.get_envs().collect();
        assert_eq!(
            env,
            [(OsStr::new("VALGRIND_LIB"), Some(OsStr::new("/x/lib")))]
        );
    }
}
