//! End-to-end tests of the ditto-body Valgrind tool: build it, run small C programs with known
//! behaviour under it, read its streams on a TCP listener, and decode them here with a minimal,
//! independent decoder of docs/body-trace.md (so a misreading shared by the tool and the crate's
//! analyzer would still show up).
//!
//! These tests need `valgrind` and `gcc`; without them they fail with a message saying what to
//! install: a skipped test would hide that the body profiler does not work on the machine.

use std::collections::{HashMap, HashSet};
use std::io::{ErrorKind, Read};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use ditto_body::tool::{ensure_tool, ensure_tool_in, ToolInstall, TOOL_BINARY};

const MAGIC: u64 = 0x3154_4259_444f_4244;
const SKIPPED: u64 = 0x4000_0000_0000_0000;
const PAYLOAD: u64 = (1 << 56) - 1;
const ADDR48: u64 = (1 << 48) - 1;

fn tool() -> &'static ToolInstall {
    static TOOL: OnceLock<ToolInstall> = OnceLock::new();
    TOOL.get_or_init(|| {
        match Command::new("valgrind").arg("--version").output() {
            Ok(o) if o.status.success() => {}
            _ => panic!("valgrind not found or not working: install the Debian package `valgrind`"),
        }
        ensure_tool().unwrap_or_else(|e| panic!("building the ditto-body tool: {e:#}"))
    })
}

/// A test program from tests/programs, compiled once per test binary run (into cargo's scratch
/// folder for integration tests, so nothing is left in /tmp).
fn program(name: &str) -> PathBuf {
    static PROGRAMS: OnceLock<PathBuf> = OnceLock::new();
    let dir = PROGRAMS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ditto-body-programs");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        for name in ["loop", "edge"] {
            let src = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/programs")
                .join(format!("{name}.c"));
            let out = Command::new("gcc")
                .args(["-O2", "-pthread", "-o"])
                .arg(dir.join(name))
                .arg(&src)
                .output()
                .unwrap_or_else(|e| panic!("running gcc ({e}): install the Debian package `gcc`"));
            assert!(
                out.status.success(),
                "gcc {}: {}",
                src.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        dir
    });
    dir.join(name)
}

/// One superblock definition, reduced to what the checks need.
#[derive(Debug, Default)]
struct Def {
    /// Per INSTR item: address and length.
    instrs: Vec<(u64, u64)>,
    /// Per MEM item: true for a store.
    slot_is_store: Vec<bool>,
    /// Per EXIT item: (instruction index, target, boring, number of MEM slots before it).
    exits: Vec<(usize, u64, bool, usize)>,
}

fn parse_def(body: &[u64]) -> (u64, Def) {
    assert!(body.len() >= 2, "SB_DEF of {} words", body.len());
    let id = body[0];
    let mut def = Def::default();
    let mut i = 2;
    while i < body.len() {
        let w = body[i];
        i += 1;
        match w >> 56 {
            1 => {
                let len = (w >> 48) & 0xff;
                assert!((1..=15).contains(&len), "SB {id}: instruction length {len}");
                def.instrs.push((w & ADDR48, len));
                i += len.div_ceil(8) as usize;
                assert!(i <= body.len(), "SB {id}: truncated instruction item");
            }
            2 => {
                assert!(!def.instrs.is_empty(), "SB {id}: MEM item before any INSTR");
                let kind = (w >> 48) & 0xff;
                assert!(kind <= 1, "SB {id}: access kind {kind}");
                def.slot_is_store.push(kind == 1);
            }
            3 => {
                assert!(
                    !def.instrs.is_empty(),
                    "SB {id}: EXIT item before any INSTR"
                );
                let kind = (w >> 48) & 0xff;
                assert!(kind <= 1, "SB {id}: jump kind {kind}");
                def.exits.push((
                    def.instrs.len() - 1,
                    w & ADDR48,
                    kind == 0,
                    def.slot_is_store.len(),
                ));
            }
            k => panic!("SB {id}: unknown item kind {k}"),
        }
    }
    (id, def)
}

/// What one stream says, checked for consistency while decoding.
#[derive(Debug, Default)]
struct Stream {
    pid: u64,
    ppid: u64,
    defs: usize,
    sb_enters: u64,
    exits_taken: u64,
    /// Loads and stores whose address is inside the watched range.
    loads_in_range: u64,
    stores_in_range: u64,
    /// Executions and taken count of the watched branch, by the rule of the doc.
    branch_executed: u64,
    branch_taken: u64,
    /// OS thread ids announced by THREAD words, and valgrind thread ids.
    os_tids: HashSet<u64>,
    vg_tids: HashSet<u64>,
    ended: bool,
}

struct Watch {
    range: (u64, u64),
    branch: u64,
}

/// The superblock execution in progress.
struct Running {
    id: u64,
    words: Vec<u64>,
}

fn decode(words: &[u64], watch: &Watch) -> Stream {
    assert!(
        words.len() >= 4,
        "stream of {} words has no header",
        words.len()
    );
    assert_eq!(words[0], MAGIC, "magic");
    assert_eq!(words[1], 1, "version");
    let mut s = Stream {
        pid: words[2],
        ppid: words[3],
        ..Stream::default()
    };
    let mut defs: HashMap<u64, Def> = HashMap::new();
    let mut running: Option<Running> = None;
    let mut i = 4;
    while i < words.len() {
        let w = words[i];
        i += 1;
        if w >> 63 == 0 {
            let r = running
                .as_mut()
                .unwrap_or_else(|| panic!("data word {w:#x} outside any superblock (word {i})"));
            r.words.push(w);
            continue;
        }
        assert!(!s.ended, "words after END");
        let tag = (w >> 56) & 0x7f;
        let payload = w & PAYLOAD;
        // Any control word ends the superblock in progress; EXIT says by which side exit.
        if let Some(r) = running.take() {
            let exit = (tag == 2).then_some(payload as usize);
            finish(&defs[&r.id], r, exit, watch, &mut s);
        }
        match tag {
            1 => {
                assert!(
                    defs.contains_key(&payload),
                    "SB_ENTER {payload} before its definition (word {i})"
                );
                s.sb_enters += 1;
                running = Some(Running {
                    id: payload,
                    words: Vec::new(),
                });
            }
            2 => s.exits_taken += 1,
            3 => {
                s.vg_tids.insert(payload >> 32);
                s.os_tids.insert(payload & 0xffff_ffff);
            }
            4 => {
                let n = payload as usize;
                assert!(i + n <= words.len(), "truncated SB_DEF");
                let (id, def) = parse_def(&words[i..i + n]);
                assert!(id >= 1, "superblock id 0");
                assert!(
                    defs.insert(id, def).is_none(),
                    "superblock {id} defined twice"
                );
                s.defs += 1;
                i += n;
            }
            5 => {
                assert_eq!(payload, 0, "END payload");
                s.ended = true;
            }
            t => panic!("unknown control tag {t} (word {i})"),
        }
    }
    if let Some(r) = running.take() {
        finish(&defs[&r.id], r, None, watch, &mut s);
    }
    s
}

/// Checks one superblock execution against its definition and counts what the tests watch.
fn finish(def: &Def, r: Running, exit: Option<usize>, watch: &Watch, s: &mut Stream) {
    let slots = match exit {
        Some(k) => {
            assert!(
                k < def.exits.len(),
                "SB {}: exit {k} of {}",
                r.id,
                def.exits.len()
            );
            def.exits[k].3
        }
        None => def.slot_is_store.len(),
    };
    assert_eq!(
        r.words.len(),
        slots,
        "SB {}: {} address words, the definition says {slots} (exit {exit:?})",
        r.id,
        r.words.len()
    );
    for (w, store) in r.words.iter().zip(&def.slot_is_store) {
        if *w != SKIPPED && (watch.range.0..watch.range.1).contains(w) {
            if *store {
                s.stores_in_range += 1;
            } else {
                s.loads_in_range += 1;
            }
        }
    }
    for (k, (instr, target, boring, _)) in def.exits.iter().enumerate() {
        let (addr, len) = def.instrs[*instr];
        if addr != watch.branch || !boring {
            continue;
        }
        let taken = match exit {
            Some(e) if e < k => continue, // left before reaching the branch
            Some(e) if e == k => *target != addr + len,
            _ => *target == addr + len,
        };
        s.branch_executed += 1;
        s.branch_taken += u64::from(taken);
    }
}

/// Runs `program` under the tool, collecting every connection's words.
fn run_under_tool(name: &str, args: &[String]) -> (Output, Vec<Vec<u64>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback listener");
    let addr = listener.local_addr().expect("listener address");
    listener
        .set_nonblocking(true)
        .expect("nonblocking listener");
    let tool = tool(); // first, so a missing valgrind or gcc is reported as such
    let mut program = vec![program(name).display().to_string()];
    program.extend_from_slice(args);
    let mut child = tool
        .command(addr, &[], &program)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("starting valgrind ({e}): install the Debian package `valgrind`")
        });
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stdout.read_to_end(&mut v);
        v
    });
    let err_reader = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = stderr.read_to_end(&mut v);
        v
    });
    let mut readers = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        match listener.accept() {
            Ok((conn, _)) => readers.push(thread::spawn(move || read_words(conn))),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if let Some(status) = child.try_wait().expect("waiting for valgrind") {
                    // Connections made just before the exit are still queued: take them too.
                    while let Ok((conn, _)) = listener.accept() {
                        readers.push(thread::spawn(move || read_words(conn)));
                    }
                    break status;
                }
                assert!(Instant::now() < deadline, "valgrind ran for over 120 s");
                thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    let streams = readers
        .into_iter()
        .map(|r| r.join().expect("reader thread"))
        .collect();
    let output = Output {
        status,
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
    };
    (output, streams)
}

fn read_words(mut conn: TcpStream) -> Vec<u64> {
    conn.set_nonblocking(false).expect("blocking stream");
    let mut bytes = Vec::new();
    conn.read_to_end(&mut bytes).expect("reading the stream");
    assert_eq!(bytes.len() % 8, 0, "stream of {} bytes", bytes.len());
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// Values the program printed: `key value...` lines.
fn printed(out: &Output, key: &str) -> Vec<Vec<u64>> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
        .map(|rest| {
            rest.split_whitespace()
                .map(|v| match v.strip_prefix("0x") {
                    Some(h) => u64::from_str_radix(h, 16).expect("hex value"),
                    None => v.parse().expect("decimal value"),
                })
                .collect()
        })
        .collect()
}

fn watch_of(out: &Output) -> Watch {
    let array = printed(out, "array");
    assert!(
        !array.is_empty(),
        "program output: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    Watch {
        range: (array[0][0], array[0][0] + array[0][1]),
        // 0: no branch watched
        branch: printed(out, "branch").first().map_or(0, |b| b[0]),
    }
}

fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "valgrind failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_known_loop_decodes_to_its_loads_and_branches() {
    const N: u64 = 30_000;
    let (out, streams) = run_under_tool("loop", &[N.to_string()]);
    assert_success(&out);
    assert_eq!(streams.len(), 1, "one process, one stream");
    let w = watch_of(&out);
    let s = decode(&streams[0], &w);
    assert_eq!(s.ppid, 0, "first process");
    assert!(s.pid > 0);
    assert!(s.ended, "the stream ends with END");
    assert!(s.defs > 100, "{} definitions", s.defs);
    assert!(s.exits_taken > 0, "some side exits were taken");
    // Exactly one load from the array per iteration; a few more would be tolerable (none expected).
    assert!(
        s.loads_in_range >= N && s.loads_in_range <= N + 8,
        "{} loads in the array, expected {N}",
        s.loads_in_range
    );
    // The initialisation loop stores all 1024 elements (possibly vectorised: fewer, wider stores).
    assert!(s.stores_in_range >= 64, "{} stores", s.stores_in_range);
    assert_eq!(s.branch_executed, N, "executions of the known branch");
    assert_eq!(s.branch_taken, N / 3, "taken count of the known branch");
    assert_eq!(s.vg_tids, HashSet::from([1]), "one thread");
    assert_eq!(
        s.os_tids,
        HashSet::from([s.pid]),
        "the main thread's id is the pid"
    );
}

#[test]
fn a_forked_child_has_its_own_stream_and_definitions() {
    const N: u64 = 3_000;
    let (out, streams) = run_under_tool("loop", &[N.to_string(), "fork".into()]);
    assert_success(&out);
    let w = watch_of(&out);
    let child_pid = printed(&out, "child")
        .first()
        .map(|v| v[0])
        .expect("the program prints its child's pid");
    assert_eq!(streams.len(), 2, "parent and child streams");
    let decoded: Vec<Stream> = streams.iter().map(|s| decode(s, &w)).collect();
    let parent = decoded
        .iter()
        .find(|s| s.ppid == 0)
        .expect("a stream with parent pid 0");
    let child = decoded
        .iter()
        .find(|s| s.pid == child_pid)
        .expect("a stream from the child");
    assert_eq!(child.ppid, parent.pid, "the child names its parent");
    assert!(parent.ended && child.ended, "both streams end with END");
    // The decoder already checked that every SB_ENTER is defined on its own stream; make sure the
    // child did define superblocks rather than reuse the parent's.
    assert!(child.defs > 10, "child defined {} superblocks", child.defs);
    assert_eq!(child.branch_executed, N);
    assert_eq!(child.branch_taken, N / 3);
    assert_eq!(child.loads_in_range, N);
    assert_eq!(
        parent.branch_executed, 0,
        "the parent does not run the loop"
    );
    assert_eq!(child.os_tids, HashSet::from([child_pid]));
}

#[test]
fn every_thread_announces_itself() {
    const N: u64 = 30_000;
    const THREADS: usize = 3;
    let (out, streams) = run_under_tool(
        "loop",
        &[N.to_string(), "threads".into(), THREADS.to_string()],
    );
    assert_success(&out);
    let w = watch_of(&out);
    assert_eq!(streams.len(), 1);
    let s = decode(&streams[0], &w);
    let tids: HashSet<u64> = printed(&out, "thread").iter().map(|v| v[0]).collect();
    assert_eq!(tids.len(), THREADS, "program output");
    for t in &tids {
        assert!(
            s.os_tids.contains(t),
            "thread {t} never announced: {:?}",
            s.os_tids
        );
    }
    assert!(s.os_tids.contains(&s.pid), "the main thread is announced");
    // Valgrind reuses the thread slot of a finished thread, so only the OS ids are distinct.
    assert_eq!(s.os_tids.len(), THREADS + 1, "{:?}", s.os_tids);
    assert_eq!(s.branch_executed, THREADS as u64 * N);
    assert_eq!(s.branch_taken, THREADS as u64 * N / 3);
    assert_eq!(s.loads_in_range, THREADS as u64 * N);
}

#[test]
fn atomics_client_requests_rep_and_faults_keep_the_stream_coherent() {
    const N: u64 = 2_000;
    let (out, streams) = run_under_tool("edge", &[N.to_string()]);
    assert_success(&out);
    assert_eq!(printed(&out, "faults"), [[10]], "the program's own check");
    assert_eq!(printed(&out, "valgrind"), [[10]], "the client request ran");
    assert_eq!(streams.len(), 1);
    // decode() checks every superblock execution against its definition (and instruction lengths
    // 1..15, which the 19-byte client request would break if it were not split).
    let s = decode(&streams[0], &watch_of(&out));
    assert!(s.ended);
    // One load slot and one store slot per locked increment; one more load for the final check.
    assert!(
        (N..=N + 2).contains(&s.loads_in_range),
        "{} loads of the atomic counter, expected {N}",
        s.loads_in_range
    );
    assert_eq!(s.stores_in_range, N, "stores of the atomic counter");
}

#[test]
fn missing_option_and_absent_analyzer_fail_in_one_clear_line() {
    let install = tool();
    let out = Command::new("valgrind")
        .env("VALGRIND_LIB", &install.lib_dir)
        .args(["--tool=ditto-body", "-q", "/bin/true"])
        .output()
        .expect("running valgrind");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "ran without --ditto-connect");
    assert!(
        err.contains("--ditto-connect") && err.contains("required"),
        "{err}"
    );

    // A port nobody listens on: bind one, then free it.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}").parse().expect("address");
    let out = install
        .command(addr, &[], &["/bin/true".to_string()])
        .output()
        .expect("running valgrind");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "ran without an analyzer");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(
        err.contains("cannot connect") && err.contains(&port.to_string()),
        "{err}"
    );
}

#[test]
fn concurrent_builds_agree_and_leave_no_debris() {
    let _ = tool(); // fail with the prerequisite message first, if any
    let root = tempfile::tempdir().expect("temp dir");
    let installs: Vec<ToolInstall> = thread::scope(|sc| {
        let handles: Vec<_> = (0..3)
            .map(|_| sc.spawn(|| ensure_tool_in(root.path())))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("builder thread").expect("build"))
            .collect()
    });
    assert!(installs.windows(2).all(|p| p[0] == p[1]), "{installs:?}");
    let install = &installs[0];
    assert!(install.tool.is_file());
    assert!(
        install.lib_dir.join(TOOL_BINARY).is_file(),
        "tool linked into VALGRIND_LIB"
    );
    assert!(install
        .lib_dir
        .join("vgpreload_core-amd64-linux.so")
        .exists());
    let entries: Vec<_> = std::fs::read_dir(root.path())
        .expect("listing the cache")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        entries.len(),
        1,
        "only the finished build remains: {entries:?}"
    );
    // A second call finds it.
    assert_eq!(&ensure_tool_in(root.path()).expect("cached"), install);
}
