//! Servers that misbehave: the generator counts, never panics, and stays within its bounds.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use ditto_load::{run, Arrival, HttpWorkload, LoadConfig, LoadError, MemcachedWorkload, Workload};

/// A server that answers every read with `reply(bytes_read)`; `None` closes the connection.
fn fake_server(reply: fn(&[u8]) -> Option<Vec<u8>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 8192];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    match reply(&buf[..n]) {
                        Some(bytes) => {
                            if stream.write_all(&bytes).is_err() {
                                return;
                            }
                        }
                        None => return,
                    }
                }
            });
        }
    });
    addr
}

fn memcached_config(addr: SocketAddr) -> LoadConfig {
    let mut cfg = LoadConfig::new(
        addr,
        Workload::Memcached(MemcachedWorkload::default()),
        200.0,
    );
    cfg.connections = 2;
    cfg.arrival = Arrival::Fixed;
    cfg.warmup = Duration::ZERO;
    cfg.duration = Duration::from_millis(500);
    cfg.request_timeout = Duration::from_millis(100);
    cfg
}

#[test]
fn garbage_replies_count_as_protocol_errors() {
    let addr = fake_server(|_| Some(b"\x00\x01garbage\xff\r\nmore garbage\r\n".to_vec()));
    let report = run(&memcached_config(addr), &mut |_| {}).unwrap();
    let summary = report.to_summary();
    assert_eq!(report.requests_sent, 100, "{summary}");
    assert_eq!(
        report.outcomes.errors.get("protocol").copied(),
        Some(100),
        "{summary}"
    );
    assert_eq!(report.requests_completed, 0);
    assert!(!report.kept_up);
    assert!(
        summary.contains("could not keep up with the offered rate"),
        "{summary}"
    );
}

#[test]
fn closed_connections_count_as_disconnects_and_are_reopened() {
    let addr = fake_server(|_| None);
    let report = run(&memcached_config(addr), &mut |_| {}).unwrap();
    let summary = report.to_summary();
    assert_eq!(
        report.outcomes.errors.get("disconnected").copied(),
        Some(100),
        "every request gets a fresh connection that is closed again: {summary}"
    );
}

#[test]
fn silent_server_times_out_within_bounds() {
    let addr = fake_server(|_| Some(Vec::new()));
    let cfg = memcached_config(addr);
    let started = Instant::now();
    let report = run(&cfg, &mut |_| {}).unwrap();
    let summary = report.to_summary();
    assert!(
        started.elapsed() < cfg.duration + Duration::from_secs(1),
        "took {:?}",
        started.elapsed()
    );
    // Each timeout costs 100 ms on its connection, so only a few requests go out.
    let timeouts = report.outcomes.errors.get("timeout").copied().unwrap_or(0);
    assert!(timeouts >= 4, "{summary}");
    assert_eq!(report.outcomes.errors_total, timeouts, "{summary}");
    assert!(
        report.requests_sent < report.requests_scheduled,
        "{summary}"
    );
}

#[test]
fn truncated_http_response_is_a_protocol_error() {
    let addr =
        fake_server(|_| Some(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort".to_vec()));
    let mut cfg = memcached_config(addr);
    cfg.workload = Workload::Http(HttpWorkload::default());
    cfg.duration = Duration::from_millis(300);
    let report = run(&cfg, &mut |_| {}).unwrap();
    // The server keeps the connection open, so the short body ends in a timeout.
    assert!(
        report.outcomes.errors.contains_key("timeout"),
        "{}",
        report.to_summary()
    );
}

#[test]
fn http_error_statuses_are_answers_with_latency() {
    let addr = fake_server(|_| {
        Some(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy".to_vec())
    });
    let mut cfg = memcached_config(addr);
    cfg.workload = Workload::Http(HttpWorkload::default());
    let report = run(&cfg, &mut |_| {}).unwrap();
    assert_eq!(report.outcomes.errors.get("http_503").copied(), Some(100));
    assert_eq!(report.requests_completed, 100);
    assert!(report.latency_us.p50 > 0.0);
}

#[test]
fn closed_port_is_a_connect_error_naming_address_and_protocol() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let err = run(&memcached_config(addr), &mut |_| {}).unwrap_err();
    assert!(matches!(err, LoadError::Connect { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(&addr.to_string()) && text.contains("memcached"),
        "{text}"
    );
}

#[test]
fn non_loopback_target_is_refused_before_any_connection() {
    let started = Instant::now();
    let err = run(
        &memcached_config("192.0.2.1:11211".parse().unwrap()),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(matches!(err, LoadError::NonLoopback { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_millis(100));
    let err = ditto_load::warm(
        "192.0.2.1:80".parse().unwrap(),
        &Workload::Http(HttpWorkload::default()),
        false,
    )
    .unwrap_err();
    assert!(matches!(err, LoadError::NonLoopback { .. }), "{err:?}");
}

#[test]
fn max_requests_caps_the_measured_requests() {
    let addr = fake_server(|_| Some(b"STORED\r\n".to_vec()));
    let mut cfg = memcached_config(addr);
    cfg.workload = Workload::Memcached(MemcachedWorkload {
        get_fraction: 0.0,
        ..MemcachedWorkload::default()
    });
    cfg.rate = 1000.0;
    cfg.duration = Duration::from_secs(5);
    cfg.max_requests = Some(101);
    let started = Instant::now();
    let report = run(&cfg, &mut |_| {}).unwrap();
    let summary = report.to_summary();
    assert_eq!(report.requests_scheduled, 101, "{summary}");
    assert_eq!(report.outcomes.ok, 101, "{summary}");
    assert!(started.elapsed() < Duration::from_secs(1), "{summary}");
    assert!(
        (report.achieved_rate - 1000.0).abs() < 30.0,
        "rate over the shortened period: {summary}"
    );
}
