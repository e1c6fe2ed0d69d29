//! Real servers started by the tests themselves, killed on drop even when a test fails.

#![allow(dead_code)]

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const MEMCACHED: &str = "/usr/bin/memcached";

/// Load tests in one test binary take turns: on a 2-core machine, two at once would measure
/// each other.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
pub const NGINX: &str = "/usr/sbin/nginx";

/// A child server process; killed and reaped on drop.
pub struct Server {
    pub addr: SocketAddr,
    child: Child,
    pub dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM first: an nginx master killed outright would orphan its worker, which keeps
        // the port open.
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: signals our own child, which has not been reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// The server's error log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

fn require(binary: &str, package: &str) {
    assert!(
        Path::new(binary).exists(),
        "{binary} is missing: run scripts/setup.sh, which installs the Debian package `{package}` \
         (these tests need the real server)"
    );
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A port that was free a moment ago.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free local port")
}

fn wait_until_listening(addr: SocketAddr, child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before listening on {addr}: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what} did not listen on {addr} within 10 s");
}

/// memcached on a free loopback port: 4 threads, no UDP, 64 MB.
pub fn memcached() -> Server {
    require(MEMCACHED, "memcached");
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let mut cmd = Command::new(MEMCACHED);
    cmd.args([
        "-p",
        &port.to_string(),
        "-l",
        "127.0.0.1",
        "-t",
        "4",
        "-U",
        "0",
    ]);
    if is_root() {
        // memcached refuses to run as root without a user to switch to.
        cmd.args(["-u", "nobody"]);
    }
    let log = std::fs::File::create(dir.path().join("error.log")).expect("log file");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("cannot start memcached");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_until_listening(addr, &mut child, "memcached");
    Server { addr, child, dir }
}

/// nginx with one worker serving a temporary root: `/index.html` (612 bytes, like the Debian
/// default page) and `/big.bin` (64 KiB).
pub fn nginx() -> Server {
    require(NGINX, "nginx");
    let dir = tempfile::tempdir().expect("temp dir");
    let prefix = dir.path();
    // The worker runs as `nobody` when we are root: it must be able to read the root.
    std::fs::set_permissions(prefix, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let html = prefix.join("html");
    std::fs::create_dir(&html).expect("html dir");
    let index = format!(
        "<!DOCTYPE html>\n<html><head><title>test</title></head><body>{}</body></html>\n",
        "x".repeat(612 - 78)
    );
    std::fs::write(html.join("index.html"), &index).expect("index.html");
    std::fs::write(html.join("big.bin"), vec![b'b'; 64 * 1024]).expect("big.bin");
    for sub in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        std::fs::create_dir(prefix.join(sub)).expect("temp subdir");
    }
    let port = free_port();
    let p = prefix.display();
    let user = if is_root() {
        "user nobody nogroup;"
    } else {
        ""
    };
    let conf = format!(
        "{user}
worker_processes 1;
pid {p}/nginx.pid;
error_log {p}/error.log;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {p}/client_body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    keepalive_requests 1000000;
    server {{
        listen 127.0.0.1:{port};
        root {p}/html;
        location / {{ }}
    }}
}}
"
    );
    let conf_path = prefix.join("nginx.conf");
    std::fs::File::create(&conf_path)
        .and_then(|mut f| f.write_all(conf.as_bytes()))
        .expect("nginx.conf");
    let mut child = Command::new(NGINX)
        .arg("-c")
        .arg(&conf_path)
        .arg("-p")
        .arg(prefix)
        .args(["-g", "daemon off;"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start nginx");
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_until_listening(addr, &mut child, "nginx");
    Server { addr, child, dir }
}
