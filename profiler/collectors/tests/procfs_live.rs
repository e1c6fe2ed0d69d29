//! The /proc collector against live child processes (python3 scripts) whose threads, sockets,
//! descriptors and memory we control. Needs root or the same user (ptrace access) — both hold for
//! children of the test.

use ditto_collect::error::CollectError;
use ditto_collect::procfs::{self, SocketFamily, SocketState};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;

/// A python3 child that prints lines we wait for and reads commands from stdin. Killed (with any
/// extra pids it reported) on drop.
struct Py {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    extra_pids: Vec<u32>,
}

impl Py {
    fn spawn(script: &str) -> Py {
        Self::spawn_as("python3", script)
    }

    fn spawn_as(program: &str, script: &str) -> Py {
        let mut child = Command::new(program)
            .arg("-u")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn python3");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Py {
            child,
            stdin,
            stdout,
            extra_pids: Vec::new(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn line(&mut self) -> String {
        let mut s = String::new();
        self.stdout.read_line(&mut s).expect("read child line");
        assert!(!s.is_empty(), "child exited early");
        s.trim().to_string()
    }

    fn send(&mut self, cmd: &str) {
        writeln!(self.stdin, "{cmd}").expect("write to child");
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        for &p in &self.extra_pids {
            // SAFETY: kill on a pid this test started (a grandchild it reported).
            unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn nonexistent_pid() -> u32 {
    let max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4_194_304);
    max + 1
}

#[test]
fn snapshot_counts_exactly_the_four_threads_of_a_child_that_starts_three() {
    let mut py = Py::spawn(
        "import threading, time\n\
         for _ in range(3): threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n\
         print('ready')\n\
         time.sleep(60)\n",
    );
    assert_eq!(py.line(), "ready");
    let snap = procfs::snapshot(&[py.pid()]).expect("snapshot");
    let p = &snap.processes[&py.pid()];
    assert_eq!(p.threads.len(), 4, "threads: {:?}", p.threads.keys());
    assert_eq!(p.num_threads, 4);
    assert!(
        p.threads.contains_key(&py.pid()),
        "the main thread's tid is the pid"
    );
    assert!(p.threads.values().all(|t| t.age_ns < 60_000_000_000));
    assert!(snap.vanished.is_empty());
}

#[test]
fn socket_options_reads_reuseport_nodelay_and_nonblocking_back_through_pidfd_getfd() {
    let mut py = Py::spawn(
        "import socket, time\n\
         a = socket.socket()\n\
         a.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n\
         a.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)\n\
         a.setblocking(False)\n\
         a.bind(('127.0.0.1', 0)); a.listen(7)\n\
         b = socket.socket()\n\
         b.bind(('127.0.0.1', 0)); b.listen(3)\n\
         print(a.fileno(), a.getsockname()[1], b.fileno(), b.getsockname()[1])\n\
         time.sleep(60)\n",
    );
    let line = py.line();
    let f: Vec<i64> = line
        .split(' ')
        .map(|x| x.parse().expect("number"))
        .collect();
    let (fd_a, port_a, fd_b, port_b) = (f[0] as i32, f[1] as u16, f[2] as i32, f[3] as u16);

    let a = procfs::socket_options(py.pid(), fd_a).expect("options of a");
    assert_eq!(a.reuse_port, Some(true));
    assert_eq!(a.tcp_nodelay, Some(true));
    assert!(a.nonblocking);
    assert_eq!(a.accept_conn, Some(true));
    assert_eq!(a.domain, Some(libc::AF_INET));
    assert_eq!(a.protocol, Some(libc::IPPROTO_TCP));
    assert_eq!(a.keepalive, Some(false));

    // The control socket has none of them: the values are read, not assumed.
    let b = procfs::socket_options(py.pid(), fd_b).expect("options of b");
    assert_eq!(b.reuse_port, Some(false));
    assert_eq!(b.tcp_nodelay, Some(false));
    assert!(!b.nonblocking);

    // The snapshot joins the same sockets with the net tables and sock_diag.
    let snap = procfs::snapshot(&[py.pid()]).expect("snapshot");
    let p = &snap.processes[&py.pid()];
    let sa = p
        .sockets
        .iter()
        .find(|s| s.fd == fd_a)
        .expect("socket a in snapshot");
    assert_eq!(sa.family, SocketFamily::Tcp4);
    assert_eq!(sa.state, SocketState::Listen);
    assert_eq!(sa.local_port, Some(port_a));
    assert_eq!(sa.nonblocking, Some(true));
    assert_eq!(sa.accept_queue.map(|q| q.backlog), Some(7));
    assert_eq!(sa.options, Some(a));
    let sb = p
        .sockets
        .iter()
        .find(|s| s.fd == fd_b)
        .expect("socket b in snapshot");
    assert_eq!(sb.local_port, Some(port_b));
    assert_eq!(sb.accept_queue.map(|q| q.backlog), Some(3));
}

#[test]
fn accept_queue_counts_connections_not_yet_accepted() {
    let mut py = Py::spawn(
        "import socket, time\n\
         s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(16)\n\
         print(s.getsockname()[1])\n\
         time.sleep(60)\n",
    );
    let port: u16 = py.line().parse().expect("port");
    let _c1 = TcpStream::connect(("127.0.0.1", port)).expect("connect 1");
    let _c2 = TcpStream::connect(("127.0.0.1", port)).expect("connect 2");
    let mut queued = None;
    wait_until("two queued connections", || {
        let l = procfs::listening_sockets(&[py.pid()]).expect("listeners");
        queued = l.first().and_then(|s| s.accept_queue);
        queued.map(|q| q.queued) == Some(2)
    });
    assert_eq!(queued.map(|q| q.backlog), Some(16));
}

#[test]
fn listener_shared_by_parent_and_forked_child_is_listed_once_with_both_holders() {
    let mut py = Py::spawn(
        "import socket, os, time\n\
         s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(5)\n\
         pid = os.fork()\n\
         if pid == 0:\n\
         \x20   time.sleep(60); os._exit(0)\n\
         print(pid, s.fileno())\n\
         time.sleep(60)\n",
    );
    let line = py.line();
    let (child, fd) = line.split_once(' ').expect("pid fd");
    let child: u32 = child.parse().expect("pid");
    let fd: i32 = fd.parse().expect("fd");
    py.extra_pids.push(child);
    let tree = procfs::process_tree(py.pid()).expect("tree");
    assert_eq!(tree, vec![py.pid(), child]);
    let l = procfs::listening_sockets(&tree).expect("listeners");
    assert_eq!(l.len(), 1, "{l:?}");
    let holders: Vec<(u32, i32)> = l[0].holders.iter().map(|h| (h.pid, h.fd)).collect();
    // Holders come in pid order, and a forked child's pid is below its parent's once pids wrap
    // (a CI run: parent 32719, child 336).
    let mut want = vec![(py.pid(), fd), (child, fd)];
    want.sort_unstable();
    assert_eq!(holders, want);
    assert!(l[0].options.is_some());
}

#[test]
fn listener_in_another_network_namespace_is_found_with_its_backlog() {
    // unshare execs python in a fresh network namespace (same pid). Its sockets are only in that
    // namespace's tables, and sock_diag must be asked from inside it.
    let mut child = Command::new("unshare")
        .args(["--net", "python3", "-u", "-c"])
        .arg(
            "import socket, sys\n\
             s = socket.socket(); s.bind(('0.0.0.0', 4242)); s.listen(9)\n\
             print(s.fileno())\n\
             sys.stdin.readline()\n",
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn unshare");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("line");
    let result = line
        .trim()
        .parse::<i32>()
        .map_err(|e| format!("child said {line:?}: {e}"))
        .and_then(|fd| {
            let l = procfs::listening_sockets(&[child.id()]).map_err(|e| e.to_string())?;
            Ok((fd, l))
        });
    let _ = child.kill();
    let _ = child.wait();
    let (fd, l) = result.expect("listening sockets");
    assert_eq!(l.len(), 1, "{l:?}");
    assert_eq!(l[0].holders[0].fd, fd);
    assert_eq!(l[0].local_port, Some(4242));
    assert_eq!(l[0].accept_queue.map(|q| q.backlog), Some(9));
    assert_eq!(l[0].options.and_then(|o| o.accept_conn), Some(true));
}

#[test]
fn a_zombie_counts_as_vanished() {
    let mut py = Py::spawn(
        "import os, time\n\
         pid = os.fork()\n\
         if pid == 0: os._exit(0)\n\
         print(pid)\n\
         time.sleep(60)\n",
    );
    let zombie: u32 = py.line().parse().expect("pid");
    wait_until("the child to become a zombie", || {
        std::fs::read_to_string(format!("/proc/{zombie}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(false)
    });
    let snap = procfs::snapshot(&[py.pid(), zombie]).expect("snapshot");
    assert_eq!(snap.vanished, vec![zombie]);
    assert!(snap.processes.contains_key(&py.pid()));
}

#[test]
fn process_tree_of_a_child_that_forks_a_grandchild_contains_both() {
    let mut py = Py::spawn(
        "import os, time\n\
         pid = os.fork()\n\
         if pid == 0:\n\
         \x20   time.sleep(60); os._exit(0)\n\
         print(pid)\n\
         time.sleep(60)\n",
    );
    let grandchild: u32 = py.line().parse().expect("pid");
    py.extra_pids.push(grandchild);
    let tree = procfs::process_tree(py.pid()).expect("tree");
    assert_eq!(tree, vec![py.pid(), grandchild]);
    // The tree of the grandchild alone is just itself.
    assert_eq!(
        procfs::process_tree(grandchild).expect("tree"),
        vec![grandchild]
    );
}

#[test]
fn referenced_bytes_grow_by_the_64_mib_a_child_touches_after_clear_refs() {
    // Tolerance: at least 60 MiB (the buffer, less rounding) and at most 64 + 16 MiB (the
    // interpreter's own pages touched while building it).
    const N: u64 = 64;
    let mut py = Py::spawn(
        "import sys\n\
         print('ready')\n\
         sys.stdin.readline()\n\
         b = b'\\x01' * (64 * 1024 * 1024)\n\
         print('touched')\n\
         sys.stdin.readline()\n",
    );
    assert_eq!(py.line(), "ready");
    procfs::clear_refs(py.pid()).expect("clear_refs");
    let before = procfs::referenced_bytes(py.pid()).expect("referenced before");
    py.send("go");
    assert_eq!(py.line(), "touched");
    let after = procfs::referenced_bytes(py.pid()).expect("referenced after");
    let grown = after.saturating_sub(before);
    assert!(
        ((N - 4) * MIB..=(N + 16) * MIB).contains(&grown),
        "referenced grew by {} MiB, expected about {N} MiB (before {} KiB, after {} KiB)",
        grown / MIB,
        before / 1024,
        after / 1024
    );
    // Clearing again drops it back near the idle level.
    procfs::clear_refs(py.pid()).expect("clear_refs again");
    let cleared = procfs::referenced_bytes(py.pid()).expect("referenced after clear");
    assert!(
        cleared < 8 * MIB,
        "still {} MiB referenced after clear_refs",
        cleared / MIB
    );
    py.send("exit");
}

#[test]
fn fd_inventory_counts_the_pipes_epoll_eventfd_file_and_directory_a_child_opens() {
    // The child inherits whatever descriptors the test harness leaks (e.g. a jobserver pipe), so
    // compare the inventory before and after it opens a known set.
    let mut py = Py::spawn(
        "import os, select, sys, tempfile, time\n\
         print('ready')\n\
         sys.stdin.readline()\n\
         p1 = os.pipe(); p2 = os.pipe()\n\
         ep = select.epoll()\n\
         ev = os.eventfd(0)\n\
         f = tempfile.TemporaryFile()\n\
         d = os.open('/', os.O_RDONLY)\n\
         print('opened')\n\
         sys.stdin.readline()\n",
    );
    assert_eq!(py.line(), "ready");
    let fds = |py: &Py| {
        let snap = procfs::snapshot(&[py.pid()]).expect("snapshot");
        let inv = snap.processes[&py.pid()].fds.expect("fds");
        let listed = std::fs::read_dir(format!("/proc/{}/fd", py.pid()))
            .expect("fd dir")
            .count();
        assert_eq!(inv.total, listed as u64);
        inv
    };
    let a = fds(&py);
    py.send("go");
    assert_eq!(py.line(), "opened");
    let b = fds(&py);
    assert_eq!(b.pipes - a.pipes, 4);
    assert_eq!(b.eventpoll - a.eventpoll, 1);
    assert_eq!(b.eventfd - a.eventfd, 1);
    assert_eq!(b.regular_files - a.regular_files, 1);
    assert_eq!(b.directories - a.directories, 1);
    assert_eq!(b.sockets, a.sockets);
    assert_eq!(b.total - a.total, 8);
    py.send("exit");
}

#[test]
fn delta_gives_the_cpu_of_a_thread_started_between_snapshots_as_appeared() {
    // The new thread spins for 0.3 s of its own CPU time, then stays alive until told to exit.
    let mut py = Py::spawn(
        "import sys, threading, time\n\
         spun = threading.Event(); stop = threading.Event()\n\
         def spin():\n\
         \x20   t = time.thread_time()\n\
         \x20   while time.thread_time() - t < 0.3: pass\n\
         \x20   spun.set(); stop.wait()\n\
         print('ready')\n\
         sys.stdin.readline()\n\
         th = threading.Thread(target=spin); th.start(); spun.wait()\n\
         print('spun')\n\
         sys.stdin.readline()\n\
         stop.set(); th.join()\n",
    );
    assert_eq!(py.line(), "ready");
    let pid = py.pid();
    let before = procfs::snapshot_with(&[pid], &thread_only()).expect("before");
    py.send("go");
    assert_eq!(py.line(), "spun");
    let after = procfs::snapshot_with(&[pid], &thread_only()).expect("after");
    let d = before.delta(&after);
    let pd = &d.processes[&pid];
    assert!(
        d.interval_ns >= 300_000_000,
        "interval {} ns",
        d.interval_ns
    );
    assert!(pd.user_secs + pd.system_secs >= 0.25, "process cpu {pd:?}");
    assert_eq!(pd.threads_appeared.len(), 1, "{pd:?}");
    let tid = pd.threads_appeared[0];
    let spinner = &pd.threads[&tid];
    assert!(
        spinner.user_secs + spinner.system_secs >= 0.25,
        "thread cpu {spinner:?}"
    );
    let main = &pd.threads[&pid];
    assert!(
        main.user_secs + main.system_secs < 0.1,
        "main thread only waited: {main:?}"
    );
    assert!(pd.threads_disappeared.is_empty());
    py.send("exit");
}

fn thread_only() -> procfs::SnapshotOptions {
    procfs::SnapshotOptions {
        memory: false,
        fds: false,
        listener_details: false,
        connection_options: 0,
    }
}

#[test]
fn delta_lists_threads_that_exited_between_snapshots_as_disappeared() {
    let mut py = Py::spawn(
        "import sys, threading, time\n\
         ev = threading.Event()\n\
         th = threading.Thread(target=ev.wait); th.start()\n\
         print('ready')\n\
         sys.stdin.readline()\n\
         ev.set(); th.join()\n\
         print('joined')\n\
         sys.stdin.readline()\n",
    );
    assert_eq!(py.line(), "ready");
    let pid = py.pid();
    let before = procfs::snapshot_with(&[pid], &thread_only()).expect("before");
    assert_eq!(before.processes[&pid].threads.len(), 2);
    py.send("go");
    assert_eq!(py.line(), "joined");
    // Python's join returns when the thread's last lock is released, before the kernel task has
    // finished exiting: wait for /proc to drop it (the collector reads /proc as it is).
    wait_until("the joined thread to leave /proc", || {
        std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, |d| d.count()) <= 1
    });
    let after = procfs::snapshot_with(&[pid], &thread_only()).expect("after");
    let d = before.delta(&after);
    let pd = &d.processes[&pid];
    let gone: Vec<u32> = before.processes[&pid]
        .threads
        .keys()
        .copied()
        .filter(|&t| t != pid)
        .collect();
    assert_eq!(pd.threads_disappeared, gone);
    assert!(pd.threads_appeared.is_empty());
    py.send("exit");
}

#[test]
fn nonexistent_pid_gives_the_no_process_error_with_a_hint() {
    let pid = nonexistent_pid();
    let e = procfs::process_tree(pid).expect_err("no such pid");
    assert!(
        matches!(e, CollectError::NoSuchProcess { pid: p } if p == pid),
        "{e:?}"
    );
    assert_eq!(e.to_string(), format!("no process {pid}: check the pid"));
    assert!(matches!(
        procfs::snapshot(&[pid]),
        Err(CollectError::NoSuchProcess { .. })
    ));
    assert!(matches!(
        procfs::socket_options(pid, 0),
        Err(CollectError::NoSuchProcess { .. })
    ));
    assert!(matches!(
        procfs::referenced_bytes(pid),
        Err(CollectError::NoSuchProcess { .. })
    ));
}

#[test]
fn snapshot_lists_a_vanished_pid_next_to_a_live_one() {
    let me = std::process::id();
    let gone = nonexistent_pid();
    let snap = procfs::snapshot_with(&[me, gone], &thread_only()).expect("snapshot");
    assert!(snap.processes.contains_key(&me));
    assert_eq!(snap.vanished, vec![gone]);
}

#[test]
fn a_thread_id_is_rejected_as_not_a_process() {
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() } as u32).expect("tid");
        let _ = stop_rx.recv();
    });
    let tid = rx.recv().expect("tid");
    let r = procfs::process_tree(tid);
    stop_tx.send(()).expect("stop");
    h.join().expect("join");
    match r {
        Err(CollectError::NotAProcess { tid: t, tgid }) => {
            assert_eq!(t, tid);
            assert_eq!(tgid, std::process::id());
        }
        other => panic!("expected NotAProcess, got {other:?}"),
    }
}

#[test]
fn socket_options_on_a_non_socket_or_closed_fd_are_clear_errors() {
    let mut py = Py::spawn("import time\nprint('ready')\ntime.sleep(60)\n");
    assert_eq!(py.line(), "ready");
    // fd 0 is a pipe (our stdin for the child).
    assert!(matches!(
        procfs::socket_options(py.pid(), 0),
        Err(CollectError::NotASocket { fd: 0, .. })
    ));
    assert!(matches!(
        procfs::socket_options(py.pid(), 999),
        Err(CollectError::NoSuchFd { fd: 999, .. })
    ));
}

#[test]
fn snapshot_json_carries_no_name_path_or_command_line_of_the_target() {
    // Run python under a distinctive program name, with a distinctive thread name, file and
    // unix socket path; none of them may appear in the serialized snapshot.
    let dir = tempfile::tempdir().expect("tempdir");
    let prog = dir.path().join("zqxsecretprog");
    std::os::unix::fs::symlink("/usr/bin/python3", &prog).expect("symlink");
    let sock = dir.path().join("zqxsecretsock");
    let file = dir.path().join("zqxsecretfile");
    let script = format!(
        "import socket, threading, time, ctypes\n\
         libc = ctypes.CDLL(None)\n\
         libc.prctl(15, b'zqxsecretthr', 0, 0, 0)\n\
         f = open({file:?}, 'w')\n\
         u = socket.socket(socket.AF_UNIX); u.bind({sock:?}); u.listen(1)\n\
         t = socket.socket(); t.bind(('127.0.0.1', 0)); t.listen(1)\n\
         print('ready')\n\
         time.sleep(60)\n",
        file = file.to_string_lossy(),
        sock = sock.to_string_lossy()
    );
    let mut py = Py::spawn_as(&prog.to_string_lossy(), &script);
    assert_eq!(py.line(), "ready");
    let snap = procfs::snapshot(&[py.pid()]).expect("snapshot");
    let p = &snap.processes[&py.pid()];
    assert!(p
        .sockets
        .iter()
        .any(|s| s.family == SocketFamily::Unix && s.is_listening()));
    assert!(p
        .sockets
        .iter()
        .any(|s| s.family == SocketFamily::Tcp4 && s.is_listening()));
    let json = serde_json::to_string(&snap).expect("json");
    for secret in ["zqxsecret", "python", "/usr", "/tmp", ".so", "127.0.0.1"] {
        assert!(!json.contains(secret), "snapshot contains {secret:?}");
    }
    // And it round-trips.
    let back: procfs::ProcSnapshot = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(&back, &snap);
}

#[test]
fn snapshot_memory_figures_are_consistent_for_our_own_process() {
    let me = std::process::id();
    let snap = procfs::snapshot(&[me]).expect("snapshot");
    let p = &snap.processes[&me];
    let smaps = p.smaps.expect("smaps");
    let maps = p.maps.expect("maps");
    assert!(smaps.rss > 0 && smaps.pss > 0 && smaps.pss <= smaps.rss);
    assert!(p.memory.vm_rss > 0 && p.memory.vm_hwm >= p.memory.vm_rss);
    assert!(
        maps.exec_file.count > 0,
        "a Rust test binary maps executable text"
    );
    assert_eq!(maps.heap.count, 1);
    assert_eq!(maps.stack.count, 1);
    // maps also lists the vsyscall page, which VmSize leaves out. The two files are read one after
    // the other, and this process's other test threads map and unmap memory (their stacks) in
    // between: compare them in a snapshot where nothing moved, of a few.
    let apart = |p: &procfs::ProcessSnapshot| {
        p.maps
            .map(|m| m.total.bytes.abs_diff(p.memory.vm_size))
            .unwrap_or(u64::MAX)
    };
    let mut closest = apart(p);
    for _ in 0..20 {
        if closest <= 4096 * 4 {
            break;
        }
        let again = procfs::snapshot(&[me]).expect("snapshot");
        closest = closest.min(apart(&again.processes[&me]));
    }
    assert!(
        closest <= 4096 * 4,
        "maps and VmSize {closest} bytes apart in every one of 21 snapshots"
    );
    assert!(p.io.is_some());
    assert_eq!(snap.clock_ticks_per_sec, 100);
}
