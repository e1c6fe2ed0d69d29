//! End-to-end tests of `ditto profile --pid` against real bundled targets, started by the tests with
//! `ditto serve`. They need root, bpftrace and the target packages (`scripts/setup.sh`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{ditto, free_port, signal, spec};

/// Profiling runs one at a time: each drives load and a tracer on a two-core machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A target started with `ditto serve`; dropping it stops the target.
struct Served {
    child: Child,
    pid: u32,
    port: u16,
}

impl Served {
    fn start(target: &str) -> Served {
        let port = free_port();
        let mut child = ditto()
            .args(["serve", "--target"])
            .arg(spec(target))
            .args(["--port", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ditto serve");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("pid line");
        let pid = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("pid="))
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{target} did not start: {line:?}"));
        Served { child, pid, port }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        signal(self.child.id(), 15);
        let _ = self.child.wait();
    }
}

fn profile(served: &Served, target: &str, extra: &[&str]) -> (Output, serde_json::Value) {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("profile.json");
    // Tracer scripts go to TMPDIR, so this run's tracer can be told from others on the machine.
    let o = ditto()
        .env("TMPDIR", dir.path())
        .args(["profile", "--pid", &served.pid.to_string(), "--target"])
        .arg(spec(target))
        .args([
            "--addr",
            &format!("127.0.0.1:{}", served.port),
            "--duration",
            "3",
            "-o",
        ])
        .arg(&out)
        .args(extra)
        .output()
        .expect("run ditto profile");
    assert!(
        o.status.success(),
        "ditto profile failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(&out).expect("profile written");
    no_tracer_left(dir.path());
    (o, serde_json::from_str(&text).expect("profile is JSON"))
}

fn clusters_with_role<'a>(p: &'a serde_json::Value, role: &str) -> Vec<&'a serde_json::Value> {
    p["threads"]["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .filter(|c| c["role"] == role)
        .collect()
}

fn per_request(p: &serde_json::Value, syscall: &str) -> f64 {
    p["syscalls"]["clusters"]
        .as_array()
        .expect("syscall clusters")
        .iter()
        .flat_map(|c| c["calls"].as_array().expect("calls"))
        .filter(|c| c["name"] == syscall)
        .map(|c| c["per_request"].as_f64().expect("per_request"))
        .sum()
}

/// No tracer whose script lives in `tmp` is still running.
fn no_tracer_left(tmp: &Path) {
    let pattern = format!("bpftrace.*{}", tmp.display());
    let o = Command::new("pgrep")
        .args(["-f", &pattern])
        .output()
        .expect("pgrep");
    assert!(
        o.stdout.is_empty(),
        "bpftrace left running: {}",
        String::from_utf8_lossy(&o.stdout)
    );
}

/// The target still answers after profiling.
fn still_serves(served: &Served, target: &str) {
    let o = ditto()
        .args(["load", "--target"])
        .arg(spec(target))
        .args(["--addr", &format!("127.0.0.1:{}", served.port)])
        .args(["--rate", "200", "--duration", "0.5", "--warmup", "0"])
        .output()
        .expect("run ditto load");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("errors 0"), "{text}");
}

#[test]
fn memcached_profile_finds_epoll_and_an_acceptor_dispatching_to_four_workers() {
    let _serial = serial();
    let served = Served::start("memcached");
    let (_, p) = profile(&served, "memcached", &[]);
    let server = &p["network"]["server"];
    assert_eq!(server["io"], "epoll", "{server}");
    assert_eq!(server["accept"], "dispatch-to-workers", "{server}");
    assert_eq!(server["workers"], 4, "{server}");
    let acceptors = clusters_with_role(&p, "acceptor");
    assert_eq!(acceptors.len(), 1);
    assert_eq!(acceptors[0]["threads"], 1);
    let workers = clusters_with_role(&p, "network-worker");
    assert_eq!(workers.len(), 1, "{:#}", p["threads"]);
    assert_eq!(workers[0]["threads"], 4);
    assert_eq!(workers[0]["triggers"][0], "epoll");
    assert_eq!(p["network"]["framing"], "line");
    // One read and one sendmsg per request; epoll_wait at most about one per request.
    let read = per_request(&p, "read");
    let sendmsg = per_request(&p, "sendmsg");
    assert!((0.9..1.2).contains(&read), "read/request {read}");
    assert!((0.9..1.1).contains(&sendmsg), "sendmsg/request {sendmsg}");
    assert!(p["conditions"]["requests"].as_u64().expect("requests") > 1000);
    assert!(p["memory"]["working_set_bytes"].as_u64().expect("ws") > 0);
    // The second window (the low level, by default): memcached's maintainer thread wakes about
    // 1,100 times a second at either load, so about 0.54 times a request at 2,000 req/s against
    // 0.12 at 10,000.
    let second = &p["syscalls"]["at_second_load"];
    let second_rate = second["achieved_rate"].as_f64().expect("second load rate");
    assert!(
        (1800.0..2200.0).contains(&second_rate),
        "the low level is 2,000 req/s: {second}"
    );
    let profiled_rate = p["conditions"]["load"]["achieved_rate"]
        .as_f64()
        .expect("rate");
    let timers = clusters_with_role(&p, "timer");
    assert_eq!(timers.len(), 1, "{:#}", p["threads"]);
    let timer = timers[0]["id"].as_str().expect("cluster id");
    let sleeps = |table: &serde_json::Value| -> f64 {
        table["clusters"]
            .as_array()
            .expect("clusters")
            .iter()
            .filter(|c| c["cluster"] == timer)
            .flat_map(|c| c["calls"].as_array().expect("calls"))
            .filter(|c| c["name"] == "clock_nanosleep")
            .map(|c| c["per_request"].as_f64().expect("per_request"))
            .sum()
    };
    let (at_profile, at_second) = (sleeps(&p["syscalls"]), sleeps(second));
    assert!(
        at_second > 1.5 * at_profile,
        "timer sleeps per request: {at_profile:.3} at {profiled_rate:.0} req/s, {at_second:.3} at {second_rate:.0}"
    );
    // The same load for half as long right before and after it, on as many connections: what
    // tells calls per connection from calls per request.
    let shorts = p["syscalls"]["at_second_load_short"]
        .as_array()
        .expect("short windows");
    assert_eq!(shorts.len(), 2, "one before and one after the long window");
    let long_requests = second["requests"].as_f64().expect("second load requests");
    let connections = p["conditions"]["load"]["connections"].clone();
    assert_eq!(second["connections"], connections, "{second}");
    for short in shorts {
        let short_requests = short["requests"].as_f64().expect("short window requests");
        assert!(
            (0.4..0.6).contains(&(short_requests / long_requests)),
            "a short window is half as long: {short_requests} requests against {long_requests}"
        );
        assert_eq!(short["connections"], connections, "{short}");
    }
    still_serves(&served, "memcached");
}

#[test]
fn nginx_profile_finds_a_master_and_one_epoll_worker_process_with_file_and_socket_syscalls() {
    let _serial = serial();
    let served = Served::start("nginx");
    let (_, p) = profile(&served, "nginx", &[]);
    let groups: Vec<(&str, u64)> = p["threads"]["processes"]
        .as_array()
        .expect("process groups")
        .iter()
        .map(|g| {
            (
                g["role"].as_str().expect("role"),
                g["count"].as_u64().expect("count"),
            )
        })
        .collect();
    assert_eq!(groups, vec![("master", 1), ("worker", 1)]);
    let server = &p["network"]["server"];
    assert_eq!(server["io"], "epoll");
    assert_eq!(server["multi_process"], true);
    assert_eq!(server["accept"], "workers-accept");
    assert_eq!(p["network"]["framing"], "http1");
    // nginx answers with writev (headers) and sendfile (the file body) per request.
    assert!(per_request(&p, "sendfile") > 0.5, "sendfile/request");
    assert!(
        per_request(&p, "openat") > 0.0
            || per_request(&p, "newfstatat") > 0.0
            || per_request(&p, "fstat") > 0.0
    );
    still_serves(&served, "nginx");
}

#[test]
fn pix_profile_finds_tokio_workers_on_epoll() {
    let _serial = serial();
    let served = Served::start("pix-optimized");
    let (_, p) = profile(&served, "pix-optimized", &["--second-level", "none"]);
    assert!(
        p["syscalls"].get("at_second_load").is_none()
            && p["syscalls"].get("at_second_load_short").is_none(),
        "--second-level none runs no second window"
    );
    let server = &p["network"]["server"];
    assert_eq!(server["io"], "epoll", "{server}");
    assert_eq!(p["network"]["framing"], "http2");
    let serving: Vec<_> = p["threads"]["clusters"]
        .as_array()
        .expect("clusters")
        .iter()
        .filter(|c| c["role"] == "acceptor-worker" || c["role"] == "network-worker")
        .collect();
    let threads: u64 = serving
        .iter()
        .map(|c| c["threads"].as_u64().expect("threads"))
        .sum();
    // tokio's multi-threaded runtime has one worker per core (2 here).
    assert!(threads >= 2, "{:#}", p["threads"]);
    // Idle tokio workers park on a futex while one of them polls epoll, so epoll is a trigger of the
    // serving cluster but not always the first.
    assert!(serving.iter().any(|c| c["triggers"]
        .as_array()
        .is_some_and(|t| t.iter().any(|x| x == "epoll"))));
    still_serves(&served, "pix-optimized");
}

#[test]
fn profile_of_a_missing_pid_is_a_one_line_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = ditto()
        .args(["profile", "--pid", "999999999", "--duration", "1", "-o"])
        .arg(dir.path().join("p.json"))
        .output()
        .expect("run ditto");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("999999999") && !err.contains("panicked"),
        "{err}"
    );
    assert!(!dir.path().join("p.json").exists());
}

#[test]
fn a_target_that_exits_mid_profile_leaves_a_partial_profile() {
    let _serial = serial();
    let served = Served::start("memcached");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("p.json");
    let child = ditto()
        .env("TMPDIR", dir.path())
        .args([
            "profile",
            "--pid",
            &served.pid.to_string(),
            "--duration",
            "30",
            "-o",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ditto profile");
    // Let the tracer attach (a few seconds on a busy machine), then kill the target.
    std::thread::sleep(Duration::from_secs(6));
    signal(served.pid, 9);
    let started = Instant::now();
    let o = child.wait_with_output().expect("wait for ditto profile");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "profiling went on for the whole 30 s window after the target died"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("partial"), "{err}");
    let p: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("partial profile saved"))
            .expect("JSON");
    assert!(
        p["conditions"]["partial"].is_string(),
        "{}",
        p["conditions"]
    );
    no_tracer_left(dir.path());
}
