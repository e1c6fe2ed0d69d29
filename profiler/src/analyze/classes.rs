//! What syscalls mean to the skeleton analysis: which move network data, which accept connections, and
//! which a thread blocks in (and so what wakes it). Kept as tables so that adding a syscall is a line.

use ditto_profile::Trigger;

/// Calls that read from a descriptor; on a socket they receive request bytes.
pub const READS: &[&str] = &[
    "read", "readv", "recvfrom", "recvmsg", "recvmmsg", "preadv", "preadv2",
];

/// Calls that write to a descriptor; on a socket they send response bytes. `sendfile`'s fd kind is
/// that of its output descriptor.
pub const WRITES: &[&str] = &[
    "write", "writev", "sendto", "sendmsg", "sendmmsg", "sendfile", "pwritev", "pwritev2", "splice",
];

/// Calls that accept connections.
pub const ACCEPTS: &[&str] = &["accept", "accept4"];

/// Calls a thread blocks in, and the trigger that ends the wait.
pub const WAITS: &[(&str, Trigger)] = &[
    ("epoll_wait", Trigger::Epoll),
    ("epoll_pwait", Trigger::Epoll),
    ("epoll_pwait2", Trigger::Epoll),
    ("poll", Trigger::Poll),
    ("ppoll", Trigger::Poll),
    ("select", Trigger::Select),
    ("pselect6", Trigger::Select),
    ("accept", Trigger::Accept),
    ("accept4", Trigger::Accept),
    ("futex", Trigger::Futex),
    ("futex_waitv", Trigger::Futex),
    ("nanosleep", Trigger::Timer),
    ("clock_nanosleep", Trigger::Timer),
    ("rt_sigtimedwait", Trigger::Signal),
    ("rt_sigsuspend", Trigger::Signal),
    ("pause", Trigger::Signal),
    ("sigwaitinfo", Trigger::Signal),
];

/// Readiness calls: a thread blocking in one of these multiplexes its descriptors.
pub fn multiplexer(trigger: Trigger) -> bool {
    matches!(trigger, Trigger::Epoll | Trigger::Poll | Trigger::Select)
}

pub fn wait_trigger(name: &str) -> Option<Trigger> {
    WAITS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

pub fn is_read(name: &str) -> bool {
    READS.contains(&name)
}

pub fn is_write(name: &str) -> bool {
    WRITES.contains(&name)
}

pub fn is_accept(name: &str) -> bool {
    ACCEPTS.contains(&name)
}
