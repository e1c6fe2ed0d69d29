//! Loading of the two data tables: system call numbers (`x86_64.tsv`, generated from the kernel
//! headers) and argument roles (`roles.tsv`). Both are compiled in, so the collectors need no files at
//! run time; a malformed line is a build-time mistake caught by the unit tests, and is skipped at run
//! time rather than aborting a profile.

use std::collections::HashMap;
use std::sync::OnceLock;

const NUMBERS_TSV: &str = include_str!("x86_64.tsv");
const ROLES_TSV: &str = include_str!("roles.tsv");

/// What a call's non-negative return value means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetKind {
    /// Nothing we histogram (a status, an fd, an address).
    Plain,
    /// Bytes moved.
    Bytes,
    /// Items: events, messages, ready fds.
    Count,
    /// Not a result at all (`exit`, `rt_sigreturn`): never counted as an error.
    None,
}

/// Direction of data on the call's fd, for request counting on sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDir {
    None,
    In,
    Out,
    /// The call closes the fd.
    Close,
}

/// The argument (or pair of arguments) whose values are counted as flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagsArg {
    One(usize),
    /// `(arg A << 32) | arg B`.
    Pair(usize, usize),
}

/// Roles of the arguments of one system call (0-based argument indices).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgRoles {
    pub name: String,
    /// The `syscalls:sys_enter_*` tracepoint suffix.
    pub tracepoint: String,
    pub fd: Option<usize>,
    pub size: Option<usize>,
    pub offset: Option<usize>,
    pub flags: Option<FlagsArg>,
    pub ret: RetKind,
    pub dir: DataDir,
}

struct Tables {
    names: HashMap<u64, String>,
    numbers: HashMap<String, u64>,
    roles: Vec<ArgRoles>,
    roles_by_name: HashMap<String, usize>,
}

fn data_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

fn parse_number_line(line: &str) -> Option<(u64, String)> {
    let mut it = line.split_whitespace();
    let nr = it.next()?.parse().ok()?;
    let name = it.next()?.to_string();
    Some((nr, name))
}

fn parse_index(field: &str) -> Result<Option<usize>, String> {
    if field == "-" {
        Ok(None)
    } else {
        field
            .parse()
            .map(Some)
            .map_err(|_| format!("bad argument index {field:?}"))
    }
}

pub(crate) fn parse_roles_line(line: &str) -> Result<ArgRoles, String> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 8 {
        return Err(format!("expected 8 columns, found {}", f.len()));
    }
    let flags = match f[5] {
        "-" => None,
        s => match s.split_once('+') {
            Some((a, b)) => Some(FlagsArg::Pair(
                a.parse().map_err(|_| format!("bad flags {s:?}"))?,
                b.parse().map_err(|_| format!("bad flags {s:?}"))?,
            )),
            None => Some(FlagsArg::One(
                s.parse().map_err(|_| format!("bad flags {s:?}"))?,
            )),
        },
    };
    let ret = match f[6] {
        "-" => RetKind::Plain,
        "bytes" => RetKind::Bytes,
        "count" => RetKind::Count,
        "none" => RetKind::None,
        s => return Err(format!("bad ret {s:?}")),
    };
    let dir = match f[7] {
        "-" => DataDir::None,
        "in" => DataDir::In,
        "out" => DataDir::Out,
        "close" => DataDir::Close,
        s => return Err(format!("bad dir {s:?}")),
    };
    Ok(ArgRoles {
        name: f[0].to_string(),
        tracepoint: if f[1] == "-" {
            f[0].to_string()
        } else {
            f[1].to_string()
        },
        fd: parse_index(f[2])?,
        size: parse_index(f[3])?,
        offset: parse_index(f[4])?,
        flags,
        ret,
        dir,
    })
}

fn tables() -> &'static Tables {
    static T: OnceLock<Tables> = OnceLock::new();
    T.get_or_init(|| {
        let mut names = HashMap::new();
        let mut numbers = HashMap::new();
        for (nr, name) in data_lines(NUMBERS_TSV).filter_map(parse_number_line) {
            numbers.insert(name.clone(), nr);
            names.insert(nr, name);
        }
        let roles: Vec<ArgRoles> = data_lines(ROLES_TSV)
            .filter_map(|l| parse_roles_line(l).ok())
            .collect();
        let roles_by_name = roles
            .iter()
            .enumerate()
            .map(|(i, r)| (r.name.clone(), i))
            .collect();
        Tables {
            names,
            numbers,
            roles,
            roles_by_name,
        }
    })
}

/// The name of an x86_64 system call number; unknown numbers (newer than the table) are `sys_NNN`.
pub fn syscall_name(nr: u64) -> String {
    match tables().names.get(&nr) {
        Some(n) => n.clone(),
        None => format!("sys_{nr}"),
    }
}

/// The number of an x86_64 system call name (also accepts `sys_NNN`).
pub fn syscall_number(name: &str) -> Option<u64> {
    tables()
        .numbers
        .get(name)
        .copied()
        .or_else(|| name.strip_prefix("sys_").and_then(|n| n.parse().ok()))
}

/// The argument roles of a call, if the table lists it.
pub fn roles(name: &str) -> Option<&'static ArgRoles> {
    let t = tables();
    t.roles_by_name.get(name).map(|&i| &t.roles[i])
}

/// All calls with argument roles.
pub fn all_roles() -> &'static [ArgRoles] {
    &tables().roles
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";

    #[test]
    fn number_table_agrees_with_kernel_header() {
        let Ok(text) = std::fs::read_to_string(HEADER) else {
            eprintln!("{HEADER} absent; skipping the comparison");
            return;
        };
        let mut seen = 0;
        for line in text.lines() {
            let mut f = line.split_whitespace();
            if f.next() != Some("#define") {
                continue;
            }
            let (Some(macro_name), Some(value)) = (f.next(), f.next()) else {
                continue;
            };
            let Some(name) = macro_name.strip_prefix("__NR_") else {
                continue;
            };
            let nr: u64 = value.parse().expect("numeric syscall number in header");
            assert_eq!(syscall_name(nr), name, "number {nr}");
            assert_eq!(syscall_number(name), Some(nr), "name {name}");
            seen += 1;
        }
        assert_eq!(
            seen,
            tables().names.len(),
            "table has entries the header lacks"
        );
    }

    #[test]
    fn every_table_line_parses() {
        for line in data_lines(NUMBERS_TSV) {
            assert!(parse_number_line(line).is_some(), "x86_64.tsv: {line:?}");
        }
        for line in data_lines(ROLES_TSV) {
            let r = parse_roles_line(line).unwrap_or_else(|e| panic!("roles.tsv {line:?}: {e}"));
            assert!(
                syscall_number(&r.name).is_some(),
                "roles.tsv names unknown call {}",
                r.name
            );
        }
    }

    #[test]
    fn well_known_numbers_and_roles() {
        assert_eq!(syscall_name(0), "read");
        assert_eq!(syscall_name(17), "pread64");
        assert_eq!(syscall_name(288), "accept4");
        assert_eq!(syscall_name(100_000), "sys_100000");
        assert_eq!(syscall_number("sys_999"), Some(999));
        let r = roles("pread64").expect("pread64 has roles");
        assert_eq!(
            (r.fd, r.size, r.offset, r.ret, r.dir),
            (Some(0), Some(2), Some(3), RetKind::Bytes, DataDir::In)
        );
        let s = roles("setsockopt").expect("setsockopt has roles");
        assert_eq!(s.flags, Some(FlagsArg::Pair(1, 2)));
        assert_eq!(
            roles("sendfile").map(|r| r.tracepoint.as_str()),
            Some("sendfile64")
        );
        assert!(roles("getppid").is_none());
    }

    #[test]
    fn roles_match_live_tracepoint_argument_counts() {
        // Each role index must name an argument the kernel's tracepoint actually has.
        let base = std::path::Path::new("/sys/kernel/tracing/events/syscalls");
        if !base.exists() {
            eprintln!("tracefs not mounted; skipping");
            return;
        }
        for r in all_roles() {
            let path = base
                .join(format!("sys_enter_{}", r.tracepoint))
                .join("format");
            let Ok(text) = std::fs::read_to_string(&path) else {
                panic!("no tracepoint for {} at {}", r.name, path.display())
            };
            let nargs = text
                .lines()
                .filter(|l| l.trim_start().starts_with("field:"))
                .filter(|l| !l.contains("common_") && !l.contains("__syscall_nr"))
                .count();
            let mut idx = vec![r.fd, r.size, r.offset];
            match r.flags {
                Some(FlagsArg::One(a)) => idx.push(Some(a)),
                Some(FlagsArg::Pair(a, b)) => idx.extend([Some(a), Some(b)]),
                None => {}
            }
            for i in idx.into_iter().flatten() {
                assert!(
                    i < nargs,
                    "{}: argument {i} but the tracepoint has {nargs}",
                    r.name
                );
            }
        }
    }
}
