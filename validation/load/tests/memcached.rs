//! Load against a real memcached started by the test.

mod common;

use std::time::Duration;

use ditto_load::{run, warm, Arrival, LoadConfig, MemcachedWorkload, Workload};

fn workload(keys: u64, get_fraction: f64) -> Workload {
    Workload::Memcached(MemcachedWorkload {
        keys,
        get_fraction,
        ..MemcachedWorkload::default()
    })
}

fn config(server: &common::Server, workload: Workload, rate: f64) -> LoadConfig {
    let mut cfg = LoadConfig::new(server.addr, workload, rate);
    cfg.connections = 4;
    cfg.arrival = Arrival::Fixed;
    cfg.warmup = Duration::from_millis(300);
    cfg.duration = Duration::from_millis(1500);
    cfg
}

#[test]
fn warm_sets_every_key_once() {
    let _turn = common::one_at_a_time();
    let server = common::memcached();
    let report = warm(server.addr, &workload(3000, 0.9), false).unwrap();
    assert_eq!(report.requests, 3000, "{report:?}");
    assert_eq!(report.ok, 3000, "{report:?}");
    assert!(report.errors.is_empty(), "{report:?}");
}

#[test]
fn memcached_load_achieves_offered_rate_without_errors_or_misses() {
    let _turn = common::one_at_a_time();
    let server = common::memcached();
    let w = workload(2000, 0.9);
    warm(server.addr, &w, false).unwrap();
    let cfg = config(&server, w, 2000.0);
    let mut ticks = 0;
    let report = run(&cfg, &mut |_| ticks += 1).unwrap();
    let summary = report.to_summary();
    assert_eq!(report.requests_scheduled, 3000, "{summary}");
    assert!(
        (report.achieved_rate - 2000.0).abs() / 2000.0 < 0.05,
        "{summary}"
    );
    assert_eq!(report.outcomes.errors_total, 0, "{summary}");
    assert_eq!(report.outcomes.miss, 0, "all keys were warmed: {summary}");
    assert_eq!(report.outcomes.ok, report.requests_completed, "{summary}");
    assert!(
        report.latency_us.p50 > 5.0 && report.latency_us.p50 < 2000.0,
        "{summary}"
    );
    assert!(report.latency_us.p50 <= report.latency_us.p99);
    // Send lag depends on what else the machine runs; the answered share must hold regardless.
    assert!(
        report.requests_completed as f64 >= 0.95 * report.requests_scheduled as f64,
        "{summary}"
    );
    assert!(ticks >= 2, "progress called {ticks} times");
}

#[test]
fn gets_of_unwarmed_keys_are_misses_not_errors() {
    let _turn = common::one_at_a_time();
    let server = common::memcached();
    let mut cfg = config(&server, workload(1_000_000, 1.0), 500.0);
    cfg.arrival = Arrival::Poisson;
    let report = run(&cfg, &mut |_| {}).unwrap();
    let summary = report.to_summary();
    assert!(report.requests_completed > 500, "{summary}");
    assert_eq!(report.outcomes.miss, report.requests_completed, "{summary}");
    assert_eq!(report.outcomes.errors_total, 0, "{summary}");
}

#[test]
fn oversized_values_are_server_errors_and_the_connection_survives() {
    let _turn = common::one_at_a_time();
    let server = common::memcached();
    // memcached's default item limit is 1 MiB: every set is refused with SERVER_ERROR.
    let w = Workload::Memcached(MemcachedWorkload {
        keys: 10,
        value_size: 2 << 20,
        get_fraction: 0.0,
        ..MemcachedWorkload::default()
    });
    let mut cfg = config(&server, w, 50.0);
    cfg.connections = 1;
    let report = run(&cfg, &mut |_| {}).unwrap();
    let summary = report.to_summary();
    assert!(report.requests_completed >= 70, "{summary}");
    assert_eq!(
        report.outcomes.errors.get("server_error").copied(),
        Some(report.requests_completed),
        "{summary}"
    );
}
