//! Pure parsers for the /proc files the snapshot reads. They take the file's text and return
//! numbers and classes only: names, paths and command lines present in the input (a thread's comm in
//! `stat`, a mapping's path in `maps`, a unix socket's path) are read past and never stored.
//!
//! They are public so that recorded files can be checked against golden values without a live
//! process, and so that other tools can reuse them on saved copies of /proc.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A file did not have the expected format. The caller adds which file it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

fn err<T>(msg: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(msg.into()))
}

fn num<T: std::str::FromStr>(field: Option<&str>, name: &str) -> Result<T, ParseError> {
    match field {
        Some(s) => s
            .parse::<T>()
            .map_err(|_| ParseError(format!("field {name}: not a number: {s:?}"))),
        None => err(format!("field {name} missing")),
    }
}

// ---------------------------------------------------------------------------------------------
// stat

/// Scheduler state of a task, from the state letter of `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Running,
    Sleeping,
    DiskSleep,
    Stopped,
    TracingStop,
    Zombie,
    Dead,
    Idle,
    Parked,
    Other,
}

impl TaskState {
    pub fn from_letter(c: char) -> Self {
        match c {
            'R' => Self::Running,
            'S' => Self::Sleeping,
            'D' => Self::DiskSleep,
            'T' => Self::Stopped,
            't' => Self::TracingStop,
            'Z' => Self::Zombie,
            'X' | 'x' => Self::Dead,
            'I' => Self::Idle,
            'P' => Self::Parked,
            _ => Self::Other,
        }
    }
}

/// The fields of `/proc/PID/stat` or `/proc/PID/task/TID/stat` that the snapshot uses. Times are in
/// clock ticks as the kernel reports them; the snapshot converts them to seconds.
///
/// For a process (`/proc/PID/stat`) the fault and time fields cover the whole thread group,
/// including threads that have exited; for a thread they cover that thread only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatFields {
    pub pid: u32,
    pub state: TaskState,
    pub ppid: u32,
    pub minflt: u64,
    pub majflt: u64,
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    pub priority: i64,
    pub nice: i64,
    pub num_threads: u64,
    pub start_ticks: u64,
    pub processor: i32,
    pub rt_priority: u32,
    pub policy: u32,
}

/// Parses a `stat` line. The comm field (in parentheses) may contain spaces and parentheses, so the
/// fields are counted from the last `)`, and comm itself is skipped.
pub fn parse_stat(text: &str) -> Result<StatFields, ParseError> {
    let open = match text.find('(') {
        Some(i) => i,
        None => return err("no '(' before comm"),
    };
    let close = match text.rfind(')') {
        Some(i) => i,
        None => return err("no ')' after comm"),
    };
    let pid: u32 = num(Some(text[..open].trim()), "pid")?;
    // After ')' the fields start at field 3 (state); index i here is field i + 3 of proc(5).
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let f = |n: usize| rest.get(n - 3).copied();
    let state = match f(3).and_then(|s| s.chars().next()) {
        Some(c) => TaskState::from_letter(c),
        None => return err("field state missing"),
    };
    Ok(StatFields {
        pid,
        state,
        ppid: num(f(4), "ppid")?,
        minflt: num(f(10), "minflt")?,
        majflt: num(f(12), "majflt")?,
        utime_ticks: num(f(14), "utime")?,
        stime_ticks: num(f(15), "stime")?,
        priority: num(f(18), "priority")?,
        nice: num(f(19), "nice")?,
        num_threads: num(f(20), "num_threads")?,
        start_ticks: num(f(22), "starttime")?,
        processor: num(f(39), "processor")?,
        rt_priority: num(f(40), "rt_priority")?,
        policy: num(f(41), "policy")?,
    })
}

// ---------------------------------------------------------------------------------------------
// status

/// The fields of `status` that the snapshot uses. Memory sizes are in bytes (the file says kB).
///
/// Memory fields are absent for zombies and kernel threads, hence the options. The context switch
/// counts of `/proc/PID/status` are those of the main thread only; per-thread files give each
/// thread's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusFields {
    pub ppid: u32,
    pub real_uid: u32,
    pub effective_uid: u32,
    pub threads: u64,
    pub vm_size: Option<u64>,
    pub vm_rss: Option<u64>,
    pub vm_hwm: Option<u64>,
    pub vm_data: Option<u64>,
    pub vm_swap: Option<u64>,
    pub rss_anon: Option<u64>,
    pub rss_file: Option<u64>,
    pub rss_shmem: Option<u64>,
    pub voluntary_ctxt_switches: u64,
    pub nonvoluntary_ctxt_switches: u64,
}

fn kb_value(v: &str) -> Result<u64, ParseError> {
    let mut it = v.split_whitespace();
    let n: u64 = num(it.next(), "size")?;
    match it.next() {
        Some("kB") | None => Ok(n * 1024),
        Some(unit) => err(format!("unexpected unit {unit:?}")),
    }
}

/// Parses `status`. The `Name:` line is ignored.
pub fn parse_status(text: &str) -> Result<StatusFields, ParseError> {
    let mut s = StatusFields::default();
    let mut seen_uid = false;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "PPid" => s.ppid = num(Some(value), "PPid")?,
            "Uid" => {
                let mut it = value.split_whitespace();
                s.real_uid = num(it.next(), "Uid real")?;
                s.effective_uid = num(it.next(), "Uid effective")?;
                seen_uid = true;
            }
            "Threads" => s.threads = num(Some(value), "Threads")?,
            "VmSize" => s.vm_size = Some(kb_value(value)?),
            "VmRSS" => s.vm_rss = Some(kb_value(value)?),
            "VmHWM" => s.vm_hwm = Some(kb_value(value)?),
            "VmData" => s.vm_data = Some(kb_value(value)?),
            "VmSwap" => s.vm_swap = Some(kb_value(value)?),
            "RssAnon" => s.rss_anon = Some(kb_value(value)?),
            "RssFile" => s.rss_file = Some(kb_value(value)?),
            "RssShmem" => s.rss_shmem = Some(kb_value(value)?),
            "voluntary_ctxt_switches" => {
                s.voluntary_ctxt_switches = num(Some(value), "voluntary_ctxt_switches")?
            }
            "nonvoluntary_ctxt_switches" => {
                s.nonvoluntary_ctxt_switches = num(Some(value), "nonvoluntary_ctxt_switches")?
            }
            _ => {}
        }
    }
    if !seen_uid {
        return err("no Uid line");
    }
    Ok(s)
}

// ---------------------------------------------------------------------------------------------
// schedstat

/// `schedstat` of a task: time on CPU, time runnable but waiting for a CPU, and number of times it
/// was scheduled in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedstat {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub timeslices: u64,
}

pub fn parse_schedstat(text: &str) -> Result<Schedstat, ParseError> {
    let mut it = text.split_whitespace();
    Ok(Schedstat {
        run_ns: num(it.next(), "run_ns")?,
        wait_ns: num(it.next(), "wait_ns")?,
        timeslices: num(it.next(), "timeslices")?,
    })
}

// ---------------------------------------------------------------------------------------------
// smaps_rollup

/// Sums over all mappings from `smaps_rollup`, in bytes. `referenced` counts pages whose accessed
/// bit is set: since the last `clear_refs` if one was written, which is how the working set is
/// measured here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmapsRollup {
    pub rss: u64,
    pub pss: u64,
    pub referenced: u64,
    pub anonymous: u64,
    pub swap: u64,
    pub anon_huge_pages: u64,
}

pub fn parse_smaps_rollup(text: &str) -> Result<SmapsRollup, ParseError> {
    let mut r = SmapsRollup::default();
    let mut seen_rss = false;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        // The header line is "start-end ---p ... [rollup]" and has no "key:" shape that matters,
        // but its address part has no ':' either, so it never lands here.
        let field = match key {
            "Rss" => {
                seen_rss = true;
                &mut r.rss
            }
            "Pss" => &mut r.pss,
            "Referenced" => &mut r.referenced,
            "Anonymous" => &mut r.anonymous,
            "Swap" => &mut r.swap,
            "AnonHugePages" => &mut r.anon_huge_pages,
            _ => continue,
        };
        *field = kb_value(value.trim())?;
    }
    if !seen_rss {
        return err("no Rss line");
    }
    Ok(r)
}

// ---------------------------------------------------------------------------------------------
// maps

/// Count and total size of a class of mappings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Region {
    pub count: u64,
    pub bytes: u64,
}

impl Region {
    fn add(&mut self, bytes: u64) {
        self.count += 1;
        self.bytes += bytes;
    }
}

/// The address space by class of mapping, from `maps`. Mapped file names are used to classify and
/// then dropped. Sizes are virtual (reserved), not resident.
///
/// - `exec_file`: file-backed and executable (program and library text);
/// - `other_file`: file-backed, not executable (rodata, data, mapped files, shared memory files);
/// - `heap`: the brk heap;
/// - `stack`: the main thread's stack (thread stacks are anonymous mappings to the kernel);
/// - `anonymous`: anonymous memory, including thread stacks and malloc arenas; `reserved` is the
///   part mapped with no access (`---p`), typically guard pages and arena reservations;
/// - `special`: vdso, vvar, vsyscall and other kernel-provided mappings.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapsSummary {
    pub exec_file: Region,
    pub other_file: Region,
    pub heap: Region,
    pub stack: Region,
    pub anonymous: Region,
    pub reserved: Region,
    pub special: Region,
    /// Mappings shared with other processes (`s` in the permissions), counted in their class too.
    pub shared: Region,
    pub total: Region,
}

pub fn parse_maps(text: &str) -> Result<MapsSummary, ParseError> {
    let mut m = MapsSummary::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // start-end perms offset dev inode [path]; the path may contain spaces, so take the five
        // fixed fields and treat the rest as the (discarded) path.
        let mut it = line.split_whitespace();
        let (Some(range), Some(perms), Some(_off), Some(_dev), Some(inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            return err(format!("line {}: fewer than 5 fields", i + 1));
        };
        let path = it.next();
        let Some((a, b)) = range.split_once('-') else {
            return err(format!("line {}: bad address range", i + 1));
        };
        let start = u64::from_str_radix(a, 16)
            .map_err(|_| ParseError(format!("line {}: bad start address", i + 1)))?;
        let end = u64::from_str_radix(b, 16)
            .map_err(|_| ParseError(format!("line {}: bad end address", i + 1)))?;
        let bytes = end.saturating_sub(start);
        let inode: u64 = num(Some(inode), "inode")?;
        let perms = perms.as_bytes();
        let exec = perms.get(2) == Some(&b'x');
        let no_access = perms.starts_with(b"---");
        m.total.add(bytes);
        if perms.get(3) == Some(&b's') {
            m.shared.add(bytes);
        }
        match path {
            Some("[heap]") => m.heap.add(bytes),
            Some("[stack]") => m.stack.add(bytes),
            Some(p) if p.starts_with("[anon") => m.anonymous.add(bytes),
            Some(p) if p.starts_with('[') => m.special.add(bytes),
            _ if inode != 0 => {
                if exec {
                    m.exec_file.add(bytes)
                } else {
                    m.other_file.add(bytes)
                }
            }
            // Anonymous shared memory shows a path ("/dev/zero (deleted)", "/SYSV...") with
            // inode 0 on some kernels; it is still anonymous memory.
            _ => {
                if no_access {
                    m.reserved.add(bytes)
                } else {
                    m.anonymous.add(bytes)
                }
            }
        }
    }
    Ok(m)
}

// ---------------------------------------------------------------------------------------------
// io

/// `/proc/PID/io`: bytes through read/write-like calls (`rchar`, `wchar`, sockets and pipes
/// included), the number of such calls, and bytes that reached or came from storage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoCounters {
    pub rchar: u64,
    pub wchar: u64,
    pub syscr: u64,
    pub syscw: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub cancelled_write_bytes: u64,
}

pub fn parse_io(text: &str) -> Result<IoCounters, ParseError> {
    let mut io = IoCounters::default();
    let mut seen = 0;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let field = match key {
            "rchar" => &mut io.rchar,
            "wchar" => &mut io.wchar,
            "syscr" => &mut io.syscr,
            "syscw" => &mut io.syscw,
            "read_bytes" => &mut io.read_bytes,
            "write_bytes" => &mut io.write_bytes,
            "cancelled_write_bytes" => &mut io.cancelled_write_bytes,
            _ => continue,
        };
        *field = num(Some(value.trim()), key)?;
        seen += 1;
    }
    if seen == 0 {
        return err("no counters");
    }
    Ok(io)
}

// ---------------------------------------------------------------------------------------------
// file descriptors

/// What a file descriptor refers to, from the target of its `/proc/PID/fd/N` link. Anonymous inode
/// kinds are the kernel's own names (eventpoll, eventfd, ...), not strings of the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FdKind {
    /// A socket, with its inode (to join with the /proc/net tables).
    Socket(u64),
    Pipe,
    /// A path in the file system; the caller refines it with stat (regular file, directory,
    /// device...). The path is not kept.
    Path,
    Memfd,
    Eventpoll,
    Eventfd,
    Timerfd,
    Signalfd,
    Inotify,
    IoUring,
    Pidfd,
    PerfEvent,
    OtherAnonInode,
    /// Namespaces and anything else.
    Other,
}

/// Classifies the target of a `/proc/PID/fd/N` link.
pub fn classify_fd_link(target: &str) -> FdKind {
    if let Some(rest) = target.strip_prefix("socket:[") {
        return match rest.strip_suffix(']').and_then(|n| n.parse().ok()) {
            Some(inode) => FdKind::Socket(inode),
            None => FdKind::Other,
        };
    }
    if target.starts_with("pipe:[") {
        return FdKind::Pipe;
    }
    if let Some(kind) = target.strip_prefix("anon_inode:") {
        let kind = kind.trim_start_matches('[').trim_end_matches(']');
        return match kind {
            "eventpoll" => FdKind::Eventpoll,
            "eventfd" => FdKind::Eventfd,
            "timerfd" => FdKind::Timerfd,
            "signalfd" => FdKind::Signalfd,
            "inotify" => FdKind::Inotify,
            "io_uring" => FdKind::IoUring,
            "pidfd" => FdKind::Pidfd,
            "perf_event" => FdKind::PerfEvent,
            _ => FdKind::OtherAnonInode,
        };
    }
    if target.starts_with("/memfd:") {
        return FdKind::Memfd;
    }
    if target.starts_with('/') {
        return FdKind::Path;
    }
    FdKind::Other
}

/// The `flags:` line of `/proc/PID/fdinfo/N` (octal open flags of the open file description).
pub fn parse_fdinfo_flags(text: &str) -> Result<u32, ParseError> {
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("flags:") {
            return u32::from_str_radix(v.trim(), 8)
                .map_err(|_| ParseError(format!("flags not octal: {:?}", v.trim())));
        }
    }
    err("no flags line")
}

// ---------------------------------------------------------------------------------------------
// /proc/net tables

/// Where a socket is bound or connected, as a class: the address itself is not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressClass {
    /// 0.0.0.0 or ::
    Wildcard,
    /// 127.0.0.0/8, ::1, or IPv4-mapped loopback
    Loopback,
    Other,
}

/// Socket state. For TCP these are the kernel's TCP states; UDP sockets use `Established` when
/// connected and `Close` otherwise (as the kernel reports them). Unix sockets use `Listen`,
/// `Unconnected`, `Connecting`, `Connected` and `Disconnecting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SocketState {
    Established,
    SynSent,
    SynRecv,
    FinWait1,
    FinWait2,
    TimeWait,
    Close,
    CloseWait,
    LastAck,
    Listen,
    Closing,
    NewSynRecv,
    Unconnected,
    Connecting,
    Connected,
    Disconnecting,
    Unknown,
}

impl SocketState {
    /// From the `st` column of /proc/net/{tcp,udp}{,6}.
    pub fn from_inet(code: u8) -> Self {
        match code {
            0x01 => Self::Established,
            0x02 => Self::SynSent,
            0x03 => Self::SynRecv,
            0x04 => Self::FinWait1,
            0x05 => Self::FinWait2,
            0x06 => Self::TimeWait,
            0x07 => Self::Close,
            0x08 => Self::CloseWait,
            0x09 => Self::LastAck,
            0x0A => Self::Listen,
            0x0B => Self::Closing,
            0x0C => Self::NewSynRecv,
            _ => Self::Unknown,
        }
    }
}

/// One row of /proc/net/{tcp,tcp6,udp,udp6}, without the addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct InetEntry {
    pub inode: u64,
    pub state: SocketState,
    pub local_port: u16,
    pub local_address: AddressClass,
    pub remote_port: u16,
    pub remote_address: AddressClass,
    /// For a listening TCP socket, the number of connections waiting to be accepted; otherwise
    /// bytes received and not yet read.
    pub rx_queue: u64,
    /// Bytes sent and not yet acknowledged (TCP) or queued (UDP).
    pub tx_queue: u64,
    pub uid: u32,
}

fn classify_addr(hex: &str) -> Result<AddressClass, ParseError> {
    // The kernel prints each 32-bit word of the network-order address as a host-order integer, so
    // converting each word back with to_ne_bytes restores the address bytes.
    if !matches!(hex.len(), 8 | 32) {
        return err(format!("bad address length {hex:?}"));
    }
    let mut bytes = Vec::with_capacity(hex.len() / 2);
    for chunk in hex.as_bytes().chunks(8) {
        let s = std::str::from_utf8(chunk).map_err(|_| ParseError("bad address".into()))?;
        let w =
            u32::from_str_radix(s, 16).map_err(|_| ParseError(format!("bad address {hex:?}")))?;
        bytes.extend_from_slice(&w.to_ne_bytes());
    }
    Ok(match bytes.len() {
        4 => {
            if bytes == [0, 0, 0, 0] {
                AddressClass::Wildcard
            } else if bytes[0] == 127 {
                AddressClass::Loopback
            } else {
                AddressClass::Other
            }
        }
        16 => {
            let mapped_v4 =
                bytes[..10].iter().all(|&b| b == 0) && bytes[10] == 0xff && bytes[11] == 0xff;
            let v6_loopback = bytes[..15].iter().all(|&b| b == 0) && bytes[15] == 1;
            if bytes.iter().all(|&b| b == 0) {
                AddressClass::Wildcard
            } else if v6_loopback || (mapped_v4 && bytes[12] == 127) {
                AddressClass::Loopback
            } else if mapped_v4 && bytes[12..] == [0, 0, 0, 0] {
                AddressClass::Wildcard
            } else {
                AddressClass::Other
            }
        }
        _ => return err(format!("bad address length {hex:?}")),
    })
}

fn split_endpoint(s: &str) -> Result<(AddressClass, u16), ParseError> {
    let Some((addr, port)) = s.split_once(':') else {
        return err(format!("bad endpoint {s:?}"));
    };
    let port =
        u16::from_str_radix(port, 16).map_err(|_| ParseError(format!("bad port {port:?}")))?;
    Ok((classify_addr(addr)?, port))
}

fn split_queues(s: &str) -> Result<(u64, u64), ParseError> {
    let Some((tx, rx)) = s.split_once(':') else {
        return err(format!("bad queues {s:?}"));
    };
    let tx = u64::from_str_radix(tx, 16).map_err(|_| ParseError(format!("bad tx_queue {tx:?}")))?;
    let rx = u64::from_str_radix(rx, 16).map_err(|_| ParseError(format!("bad rx_queue {rx:?}")))?;
    Ok((tx, rx))
}

/// Parses /proc/net/tcp, tcp6, udp or udp6 (same layout). Rows with inode 0 (TIME_WAIT and other
/// sockets no longer owned by any file descriptor) are kept: the caller joins by inode and they
/// simply never match.
pub fn parse_inet_table(text: &str) -> Result<Vec<InetEntry>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() < 10 {
            return err(format!(
                "line {}: {} fields, expected at least 10",
                i + 1,
                f.len()
            ));
        }
        let (local_address, local_port) = split_endpoint(f[1])?;
        let (remote_address, remote_port) = split_endpoint(f[2])?;
        let st = u8::from_str_radix(f[3], 16)
            .map_err(|_| ParseError(format!("line {}: bad state", i + 1)))?;
        let (tx_queue, rx_queue) = split_queues(f[4])?;
        out.push(InetEntry {
            inode: num(Some(f[9]), "inode")?,
            state: SocketState::from_inet(st),
            local_port,
            local_address,
            remote_port,
            remote_address,
            rx_queue,
            tx_queue,
            uid: num(Some(f[7]), "uid")?,
        });
    }
    Ok(out)
}

/// Socket type (SOCK_STREAM, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SocketType {
    Stream,
    Datagram,
    Raw,
    SeqPacket,
    Other,
}

impl SocketType {
    pub fn from_raw(t: i32) -> Self {
        match t {
            libc::SOCK_STREAM => Self::Stream,
            libc::SOCK_DGRAM => Self::Datagram,
            libc::SOCK_RAW => Self::Raw,
            libc::SOCK_SEQPACKET => Self::SeqPacket,
            _ => Self::Other,
        }
    }
}

/// One row of /proc/net/unix, without the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnixEntry {
    pub inode: u64,
    pub socket_type: SocketType,
    pub state: SocketState,
    /// Whether the socket has a name (file system or abstract); the name itself is not kept.
    pub bound: bool,
}

/// Parses /proc/net/unix.
pub fn parse_unix_table(text: &str) -> Result<Vec<UnixEntry>, ParseError> {
    const SO_ACCEPTCON: u32 = 1 << 16;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.is_empty() {
            continue;
        }
        if f.len() < 7 {
            return err(format!(
                "line {}: {} fields, expected at least 7",
                i + 1,
                f.len()
            ));
        }
        let flags = u32::from_str_radix(f[3], 16)
            .map_err(|_| ParseError(format!("line {}: bad flags", i + 1)))?;
        let ty = i32::from_str_radix(f[4], 16)
            .map_err(|_| ParseError(format!("line {}: bad type", i + 1)))?;
        let st = u8::from_str_radix(f[5], 16)
            .map_err(|_| ParseError(format!("line {}: bad state", i + 1)))?;
        let state = if flags & SO_ACCEPTCON != 0 {
            SocketState::Listen
        } else {
            match st {
                1 => SocketState::Unconnected,
                2 => SocketState::Connecting,
                3 => SocketState::Connected,
                4 => SocketState::Disconnecting,
                _ => SocketState::Unknown,
            }
        };
        out.push(UnixEntry {
            inode: num(Some(f[6]), "inode")?,
            socket_type: SocketType::from_raw(ty),
            state,
            bound: f.len() > 7,
        });
    }
    Ok(out)
}
