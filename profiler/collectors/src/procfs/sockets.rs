//! The target's sockets: which ones it holds (/proc/PID/fd joined with the /proc/PID/net tables of
//! its network namespace), the options set on them, and the accept backlog of listeners.
//!
//! Options are read through a duplicate of the target's descriptor obtained with `pidfd_getfd`
//! (Linux ≥ 5.6). The alternative, injecting `getsockopt` calls into the target with ptrace, stops
//! every thread of the target, rewrites its registers and risks leaving it broken if we die midway;
//! a duplicate descriptor refers to the same socket and the same open file description, so
//! `getsockopt` and `fcntl(F_GETFL)` on it read the target's values without the target noticing.
//! The duplicate is closed at once; it never receives or sends data. The cost is the permission
//! check (PTRACE_MODE_ATTACH, i.e. root or same user with ptrace allowed).
//!
//! The accept backlog (the `backlog` argument of `listen`, capped by `net.core.somaxconn`) is not in
//! /proc/net/tcp. It comes from NETLINK_SOCK_DIAG: for a listening socket the kernel reports the
//! current accept queue length as `idiag_rqueue` and the backlog as `idiag_wqueue` (this is what
//! `ss -ltn` shows as Recv-Q/Send-Q). A netlink socket answers for the network namespace it was
//! created in, so for a target in another namespace the query runs on a short-lived thread that
//! first joins that namespace with `setns` (our other threads are not affected).

use super::parse::{self, AddressClass, InetEntry, SocketState, SocketType, UnixEntry};
use crate::error::CollectError;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Network family and transport of a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SocketFamily {
    Tcp4,
    Tcp6,
    Udp4,
    Udp6,
    Unix,
    /// netlink, packet, raw and sockets that closed between listing descriptors and reading tables
    Other,
}

/// Length and capacity of a listening socket's accept queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcceptQueue {
    /// Connections established and waiting for `accept`.
    pub queued: u32,
    /// The backlog passed to `listen` (after the kernel's cap at `somaxconn`).
    pub backlog: u32,
}

/// Options of one socket, read through a duplicate of the target's descriptor. `None` means the
/// option does not apply to this socket (TCP options on a unix socket) or could not be read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketOptions {
    /// `SO_DOMAIN` (AF_INET = 2, AF_INET6 = 10, AF_UNIX = 1, ...).
    pub domain: Option<i32>,
    /// `SO_TYPE`.
    pub socket_type: Option<SocketType>,
    /// `SO_PROTOCOL` (IPPROTO_TCP = 6, IPPROTO_UDP = 17, 0 for unix).
    pub protocol: Option<i32>,
    /// `SO_ACCEPTCONN`: the socket is listening.
    pub accept_conn: Option<bool>,
    pub reuse_addr: Option<bool>,
    pub reuse_port: Option<bool>,
    pub keepalive: Option<bool>,
    /// `SO_RCVBUF` in bytes as the kernel reports it (twice the value set, see socket(7)).
    pub rcvbuf: Option<u32>,
    /// `SO_SNDBUF` in bytes as the kernel reports it.
    pub sndbuf: Option<u32>,
    /// `O_NONBLOCK` on the open file description (shared with the target's descriptor).
    pub nonblocking: bool,
    /// `IPV6_V6ONLY`, IPv6 sockets only.
    pub ipv6_only: Option<bool>,
    pub tcp_nodelay: Option<bool>,
    pub tcp_cork: Option<bool>,
    /// `TCP_DEFER_ACCEPT` in seconds (the kernel rounds to its retransmission schedule).
    pub tcp_defer_accept: Option<u32>,
    /// `TCP_FASTOPEN` queue length of a listener (0 when off).
    pub tcp_fastopen_qlen: Option<u32>,
}

/// A socket held by a process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketInfo {
    pub fd: i32,
    pub inode: u64,
    pub family: SocketFamily,
    /// Known for unix sockets from the table; for inet sockets implied by the family (TCP stream,
    /// UDP datagram).
    pub socket_type: Option<SocketType>,
    pub state: SocketState,
    pub local_port: Option<u16>,
    pub local_address: Option<AddressClass>,
    pub remote_port: Option<u16>,
    pub remote_address: Option<AddressClass>,
    /// See [`InetEntry::rx_queue`]; `None` for unix sockets.
    pub rx_queue: Option<u64>,
    pub tx_queue: Option<u64>,
    /// `O_NONBLOCK` from /proc/PID/fdinfo (no descriptor duplication needed).
    pub nonblocking: Option<bool>,
    /// Listening TCP sockets only, from sock_diag.
    pub accept_queue: Option<AcceptQueue>,
    /// Listening sockets and a few accepted connections, when requested.
    pub options: Option<SocketOptions>,
}

impl SocketInfo {
    pub fn is_listening(&self) -> bool {
        self.state == SocketState::Listen
    }
}

/// A descriptor of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FdRef {
    pub pid: u32,
    pub fd: i32,
}

/// A listening socket and every descriptor that refers to it (an nginx listener is held by the
/// master and each worker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListeningSocket {
    pub inode: u64,
    pub family: SocketFamily,
    pub socket_type: Option<SocketType>,
    pub local_port: Option<u16>,
    pub local_address: Option<AddressClass>,
    /// In pid order.
    pub holders: Vec<FdRef>,
    pub accept_queue: Option<AcceptQueue>,
    pub options: Option<SocketOptions>,
}

// ---------------------------------------------------------------------------------------------
// helpers shared with mod.rs

pub(super) fn is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

/// Maps an I/O error on a file of process `pid` to a `CollectError`: a vanished file means the
/// process is gone.
pub(super) fn map_io(pid: u32, path: &Path, e: io::Error) -> CollectError {
    if is_gone(&e) {
        CollectError::NoSuchProcess { pid }
    } else if e.kind() == io::ErrorKind::PermissionDenied {
        CollectError::PermissionDenied {
            pid,
            path: path.to_path_buf(),
        }
    } else {
        CollectError::Io {
            path: path.to_path_buf(),
            source: e,
        }
    }
}

/// The inode of the network namespace of `pid` (`None` for ourselves means "ours").
pub(super) fn netns_inode(pid: Option<u32>) -> Result<u64, CollectError> {
    let path = match pid {
        Some(p) => PathBuf::from(format!("/proc/{p}/ns/net")),
        None => PathBuf::from("/proc/thread-self/ns/net"),
    };
    fs::metadata(&path)
        .map(|m| m.ino())
        .map_err(|e| map_io(pid.unwrap_or(0), &path, e))
}

// ---------------------------------------------------------------------------------------------
// /proc/PID/net tables

/// The socket tables of one network namespace, by inode.
#[derive(Debug, Default)]
pub(super) struct NetTables {
    inet: HashMap<u64, (SocketFamily, InetEntry)>,
    unix: HashMap<u64, UnixEntry>,
}

impl NetTables {
    /// Reads the tables through /proc/PID/net, which shows the namespace of `pid`. A table that
    /// does not exist (IPv6 disabled) is empty.
    pub(super) fn load(pid: u32) -> Result<Self, CollectError> {
        let mut t = NetTables::default();
        let inet = [
            ("tcp", SocketFamily::Tcp4),
            ("tcp6", SocketFamily::Tcp6),
            ("udp", SocketFamily::Udp4),
            ("udp6", SocketFamily::Udp6),
        ];
        for (name, family) in inet {
            let path = PathBuf::from(format!("/proc/{pid}/net/{name}"));
            let Some(text) = read_optional(pid, &path)? else {
                continue;
            };
            let rows = parse::parse_inet_table(&text).map_err(|e| CollectError::Parse {
                path: path.clone(),
                detail: e.0,
            })?;
            for row in rows {
                if row.inode != 0 {
                    t.inet.insert(row.inode, (family, row));
                }
            }
        }
        let path = PathBuf::from(format!("/proc/{pid}/net/unix"));
        if let Some(text) = read_optional(pid, &path)? {
            let rows = parse::parse_unix_table(&text).map_err(|e| CollectError::Parse {
                path: path.clone(),
                detail: e.0,
            })?;
            for row in rows {
                t.unix.insert(row.inode, row);
            }
        }
        Ok(t)
    }

    /// Describes the socket with this inode held as descriptor `fd`.
    pub(super) fn describe(&self, fd: i32, inode: u64) -> SocketInfo {
        let mut s = SocketInfo {
            fd,
            inode,
            family: SocketFamily::Other,
            socket_type: None,
            state: SocketState::Unknown,
            local_port: None,
            local_address: None,
            remote_port: None,
            remote_address: None,
            rx_queue: None,
            tx_queue: None,
            nonblocking: None,
            accept_queue: None,
            options: None,
        };
        if let Some((family, e)) = self.inet.get(&inode) {
            s.family = *family;
            s.socket_type = Some(match family {
                SocketFamily::Tcp4 | SocketFamily::Tcp6 => SocketType::Stream,
                _ => SocketType::Datagram,
            });
            s.state = e.state;
            s.local_port = Some(e.local_port);
            s.local_address = Some(e.local_address);
            s.remote_port = Some(e.remote_port);
            s.remote_address = Some(e.remote_address);
            s.rx_queue = Some(e.rx_queue);
            s.tx_queue = Some(e.tx_queue);
        } else if let Some(u) = self.unix.get(&inode) {
            s.family = SocketFamily::Unix;
            s.socket_type = Some(u.socket_type);
            s.state = u.state;
        }
        s
    }
}

/// Reads a file that may legitimately be missing; a missing process is still an error.
fn read_optional(pid: u32, path: &Path) -> Result<Option<String>, CollectError> {
    match fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if Path::new(&format!("/proc/{pid}")).exists() {
                Ok(None)
            } else {
                Err(CollectError::NoSuchProcess { pid })
            }
        }
        Err(e) => Err(map_io(pid, path, e)),
    }
}

// ---------------------------------------------------------------------------------------------
// pidfd_getfd

/// A pidfd of the target, used to duplicate its descriptors.
pub(super) struct Pidfd {
    pid: u32,
    fd: OwnedFd,
}

impl Pidfd {
    pub(super) fn open(pid: u32) -> Result<Self, CollectError> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0u32) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::ESRCH) => CollectError::NoSuchProcess { pid },
                Some(libc::EPERM) | Some(libc::EACCES) => CollectError::PermissionDenied {
                    pid,
                    path: PathBuf::from(format!("pidfd_open({pid})")),
                },
                _ => CollectError::Syscall {
                    pid,
                    call: "pidfd_open",
                    source: e,
                },
            });
        }
        // SAFETY: r is a descriptor the kernel just gave us and nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(r as RawFd) };
        Ok(Pidfd { pid, fd })
    }

    /// Duplicates the target's descriptor `target_fd` into this process.
    pub(super) fn get_fd(&self, target_fd: i32) -> Result<OwnedFd, CollectError> {
        let pid = self.pid;
        // SAFETY: pidfd_getfd takes a pidfd, a descriptor number in the target and flags (must be
        // 0); it returns a new descriptor (with FD_CLOEXEC set) or -1.
        let r =
            unsafe { libc::syscall(libc::SYS_pidfd_getfd, self.fd.as_raw_fd(), target_fd, 0u32) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EBADF) => CollectError::NoSuchFd { pid, fd: target_fd },
                Some(libc::ESRCH) => CollectError::NoSuchProcess { pid },
                Some(libc::EPERM) | Some(libc::EACCES) => CollectError::PermissionDenied {
                    pid,
                    path: PathBuf::from(format!("pidfd_getfd({pid}, {target_fd})")),
                },
                _ => CollectError::Syscall {
                    pid,
                    call: "pidfd_getfd",
                    source: e,
                },
            });
        }
        // SAFETY: as in `open`.
        Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
    }

    /// Reads the options of the target's socket `target_fd`.
    pub(super) fn socket_options(&self, target_fd: i32) -> Result<SocketOptions, CollectError> {
        let dup = self.get_fd(target_fd)?;
        // SAFETY: fstat on a descriptor we own into a zeroed stat buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(dup.as_raw_fd(), &mut st) } != 0 {
            return Err(CollectError::Syscall {
                pid: self.pid,
                call: "fstat",
                source: io::Error::last_os_error(),
            });
        }
        if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return Err(CollectError::NotASocket {
                pid: self.pid,
                fd: target_fd,
            });
        }
        Ok(read_options(dup.as_raw_fd()))
        // `dup` is closed here.
    }
}

fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> Option<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v and len are valid for the duration of the call and len matches v's size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

fn read_options(fd: RawFd) -> SocketOptions {
    use libc::{IPPROTO_IPV6, IPPROTO_TCP, SOL_SOCKET};
    let flag = |level, name| getsockopt_int(fd, level, name).map(|v| v != 0);
    let size = |level, name| getsockopt_int(fd, level, name).and_then(|v| u32::try_from(v).ok());
    let domain = getsockopt_int(fd, SOL_SOCKET, libc::SO_DOMAIN);
    let protocol = getsockopt_int(fd, SOL_SOCKET, libc::SO_PROTOCOL);
    let inet = matches!(domain, Some(libc::AF_INET) | Some(libc::AF_INET6));
    let tcp = inet && protocol == Some(IPPROTO_TCP);
    // SAFETY: F_GETFL on a descriptor we own.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    SocketOptions {
        domain,
        socket_type: getsockopt_int(fd, SOL_SOCKET, libc::SO_TYPE).map(SocketType::from_raw),
        protocol,
        accept_conn: flag(SOL_SOCKET, libc::SO_ACCEPTCONN),
        reuse_addr: flag(SOL_SOCKET, libc::SO_REUSEADDR),
        reuse_port: flag(SOL_SOCKET, libc::SO_REUSEPORT),
        keepalive: flag(SOL_SOCKET, libc::SO_KEEPALIVE),
        rcvbuf: size(SOL_SOCKET, libc::SO_RCVBUF),
        sndbuf: size(SOL_SOCKET, libc::SO_SNDBUF),
        nonblocking: fl >= 0 && fl & libc::O_NONBLOCK != 0,
        ipv6_only: if domain == Some(libc::AF_INET6) {
            flag(IPPROTO_IPV6, libc::IPV6_V6ONLY)
        } else {
            None
        },
        tcp_nodelay: if tcp {
            flag(IPPROTO_TCP, libc::TCP_NODELAY)
        } else {
            None
        },
        tcp_cork: if tcp {
            flag(IPPROTO_TCP, libc::TCP_CORK)
        } else {
            None
        },
        tcp_defer_accept: if tcp {
            size(IPPROTO_TCP, libc::TCP_DEFER_ACCEPT)
        } else {
            None
        },
        tcp_fastopen_qlen: if tcp {
            size(IPPROTO_TCP, libc::TCP_FASTOPEN)
        } else {
            None
        },
    }
}

/// Reads the options of socket descriptor `fd` of process `pid` without disturbing it: the
/// descriptor is duplicated into this process with `pidfd_getfd`, queried with `getsockopt` and
/// `fcntl(F_GETFL)`, and closed.
///
/// Errors: [`CollectError::NoSuchProcess`], [`CollectError::NoSuchFd`],
/// [`CollectError::NotASocket`], [`CollectError::PermissionDenied`] (needs ptrace access to the
/// target).
pub fn socket_options(pid: u32, fd: i32) -> Result<SocketOptions, CollectError> {
    Pidfd::open(pid)?.socket_options(fd)
}

// ---------------------------------------------------------------------------------------------
// sock_diag

/// Runs `f` inside the network namespace of `pid`: directly when it is ours, otherwise on a
/// short-lived thread that joins the namespace first (setns changes the calling thread only).
fn in_netns_of<T: Send>(
    pid: u32,
    f: impl FnOnce() -> Result<T, CollectError> + Send,
) -> Result<T, CollectError> {
    if netns_inode(Some(pid))? == netns_inode(None)? {
        return f();
    }
    let path = PathBuf::from(format!("/proc/{pid}/ns/net"));
    let ns = fs::File::open(&path).map_err(|e| map_io(pid, &path, e))?;
    std::thread::scope(|s| {
        let handle = s.spawn(|| {
            // SAFETY: setns with a namespace descriptor we opened; it affects this thread only,
            // which ends when `f` returns.
            if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(CollectError::Syscall {
                    pid,
                    call: "setns(CLONE_NEWNET)",
                    source: io::Error::last_os_error(),
                });
            }
            f()
        });
        handle.join().unwrap_or_else(|_| {
            Err(CollectError::Syscall {
                pid,
                call: "sock_diag thread",
                source: io::Error::other("thread panicked"),
            })
        })
    })
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_HDR_LEN: usize = 16;
const INET_DIAG_REQ_V2_LEN: usize = 56;
const INET_DIAG_MSG_LEN: usize = 72;
const TCP_LISTEN: u32 = 10;

/// Accept queues of every listening TCP socket in the network namespace of `pid`, by socket
/// inode, from NETLINK_SOCK_DIAG (what `ss -ltn` shows as Recv-Q/Send-Q for listeners). Joining
/// another namespace needs CAP_SYS_ADMIN.
pub fn accept_queues(pid: u32) -> Result<HashMap<u64, AcceptQueue>, CollectError> {
    in_netns_of(pid, move || {
        let mut out = HashMap::new();
        for family in [libc::AF_INET, libc::AF_INET6] {
            inet_diag_listeners(pid, family as u8, &mut out)?;
        }
        Ok(out)
    })
}

fn diag_err(pid: u32, call: &'static str, source: io::Error) -> CollectError {
    CollectError::Syscall { pid, call, source }
}

fn inet_diag_listeners(
    pid: u32,
    family: u8,
    out: &mut HashMap<u64, AcceptQueue>,
) -> Result<(), CollectError> {
    // SAFETY: plain socket(2) call; the result is checked and owned below.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return Err(diag_err(
            pid,
            "socket(NETLINK_SOCK_DIAG)",
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: raw is a fresh descriptor owned by nobody else.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };

    // struct nlmsghdr + struct inet_diag_req_v2, built byte by byte in native order.
    let mut req = Vec::with_capacity(NLMSG_HDR_LEN + INET_DIAG_REQ_V2_LEN);
    let total = (NLMSG_HDR_LEN + INET_DIAG_REQ_V2_LEN) as u32;
    req.extend_from_slice(&total.to_ne_bytes());
    req.extend_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    req.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
    req.push(family);
    req.push(libc::IPPROTO_TCP as u8);
    req.push(0); // no extensions
    req.push(0); // pad
    req.extend_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    req.resize(NLMSG_HDR_LEN + INET_DIAG_REQ_V2_LEN, 0); // inet_diag_sockid: match all

    // SAFETY: sockaddr_nl is plain data; zeroed is a valid value.
    let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: buffer and address are valid for the given lengths.
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            req.as_ptr().cast(),
            req.len(),
            0,
            (&addr as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(diag_err(
            pid,
            "sendto(sock_diag)",
            io::Error::last_os_error(),
        ));
    }

    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: buf is valid for buf.len() bytes.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(diag_err(pid, "recv(sock_diag)", e));
        }
        let n = n as usize;
        if n == 0 {
            return Ok(());
        }
        let mut off = 0;
        while off + NLMSG_HDR_LEN <= n {
            let rd32 = |o: usize| -> u32 {
                let mut b = [0u8; 4];
                b.copy_from_slice(&buf[o..o + 4]);
                u32::from_ne_bytes(b)
            };
            let len = rd32(off) as usize;
            let ty = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
            if len < NLMSG_HDR_LEN || off + len > n {
                return Err(diag_err(
                    pid,
                    "recv(sock_diag)",
                    io::Error::other("truncated netlink message"),
                ));
            }
            match ty as libc::c_int {
                libc::NLMSG_DONE => return Ok(()),
                libc::NLMSG_ERROR => {
                    let code = if len >= NLMSG_HDR_LEN + 4 {
                        rd32(off + NLMSG_HDR_LEN) as i32
                    } else {
                        0
                    };
                    if code == 0 {
                        // An acknowledgement, not an error.
                    } else {
                        return Err(diag_err(
                            pid,
                            "sock_diag",
                            io::Error::from_raw_os_error(-code),
                        ));
                    }
                }
                _ if ty == SOCK_DIAG_BY_FAMILY && len >= NLMSG_HDR_LEN + INET_DIAG_MSG_LEN => {
                    let m = off + NLMSG_HDR_LEN;
                    let state = buf[m + 1] as u32;
                    let rqueue = rd32(m + 56);
                    let wqueue = rd32(m + 60);
                    let inode = rd32(m + 68) as u64;
                    if state == TCP_LISTEN && inode != 0 {
                        out.insert(
                            inode,
                            AcceptQueue {
                                queued: rqueue,
                                backlog: wqueue,
                            },
                        );
                    }
                }
                _ => {}
            }
            // Messages are padded to 4 bytes (NLMSG_ALIGN).
            off += (len + 3) & !3;
        }
    }
}
