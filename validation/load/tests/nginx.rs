//! Load against a real nginx started by the test.

mod common;

use std::time::Duration;

use ditto_load::{run, warm, Arrival, HttpWorkload, LoadConfig, WeightedPath, Workload};

fn paths(list: &[(&str, f64)]) -> Workload {
    Workload::Http(HttpWorkload {
        paths: list
            .iter()
            .map(|&(path, weight)| WeightedPath {
                path: path.into(),
                weight,
            })
            .collect(),
        host: None,
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
fn warm_fetches_every_path_once() {
    let _turn = common::one_at_a_time();
    let server = common::nginx();
    let w = paths(&[("/index.html", 1.0), ("/big.bin", 1.0)]);
    let report = warm(server.addr, &w, false).unwrap();
    assert_eq!((report.requests, report.ok), (2, 2), "{report:?}");
}

#[test]
fn nginx_load_achieves_offered_rate_with_sane_latency() {
    let _turn = common::one_at_a_time();
    let server = common::nginx();
    let w = paths(&[("/index.html", 3.0), ("/big.bin", 1.0)]);
    warm(server.addr, &w, false).unwrap();
    let report = run(&config(&server, w, 1000.0), &mut |_| {}).unwrap();
    let summary = report.to_summary();
    assert_eq!(
        report.requests_scheduled,
        1500,
        "{summary}\n{}",
        server.log()
    );
    assert!(
        (report.achieved_rate - 1000.0).abs() / 1000.0 < 0.05,
        "{summary}"
    );
    assert_eq!(
        report.outcomes.errors_total,
        0,
        "{summary}\n{}",
        server.log()
    );
    assert!(
        report.latency_us.p50 > 5.0 && report.latency_us.p50 < 5000.0,
        "{summary}"
    );
    // Send lag depends on what else the machine runs; the answered share must hold regardless.
    assert!(
        report.requests_completed as f64 >= 0.95 * report.requests_scheduled as f64,
        "{summary}"
    );
}

#[test]
fn request_classes_count_each_paths_responses_and_their_whole_bytes() {
    let _turn = common::one_at_a_time();
    let server = common::nginx();
    let w = paths(&[("/index.html", 3.0), ("/big.bin", 1.0)]);
    let report = run(&config(&server, w, 400.0), &mut |_| {}).unwrap();
    let summary = report.to_summary();
    let classes = &report.request_classes;
    assert_eq!(classes.len(), 2, "{classes:?}");
    assert_eq!(
        (classes[0].key.as_str(), classes[1].key.as_str()),
        ("/index.html", "/big.bin")
    );
    assert_eq!(
        classes[0].responses + classes[1].responses,
        report.requests_completed,
        "{summary}"
    );
    // Each response is the file plus nginx's head (a few hundred bytes), never less than the file.
    for (class, file) in classes.iter().zip([612u64, 64 * 1024]) {
        assert!(class.responses > 0, "{classes:?}");
        let mean = class.response_bytes as f64 / class.responses as f64;
        assert!(
            mean > file as f64 && mean < file as f64 + 400.0,
            "{}: {mean} bytes a response for a {file}-byte file",
            class.key
        );
    }
}

#[test]
fn missing_path_counts_as_http_404_and_keeps_the_connection() {
    let _turn = common::one_at_a_time();
    let server = common::nginx();
    let w = paths(&[("/index.html", 1.0), ("/missing", 1.0)]);
    let mut cfg = config(&server, w, 400.0);
    cfg.arrival = Arrival::Poisson;
    let report = run(&cfg, &mut |_| {}).unwrap();
    let summary = report.to_summary();
    let not_found = report.outcomes.errors.get("http_404").copied().unwrap_or(0);
    assert_eq!(report.outcomes.errors.len(), 1, "only 404s: {summary}");
    assert_eq!(report.outcomes.ok + not_found, report.requests_completed);
    let share = not_found as f64 / report.requests_completed as f64;
    assert!((0.35..0.65).contains(&share), "{summary}");
}

#[test]
fn histogram_log_and_json_are_written() {
    let _turn = common::one_at_a_time();
    let server = common::nginx();
    let mut cfg = config(&server, paths(&[("/index.html", 1.0)]), 200.0);
    cfg.duration = Duration::from_millis(500);
    cfg.warmup = Duration::ZERO;
    let report = run(&cfg, &mut |_| {}).unwrap();
    let out = tempfile::tempdir().unwrap();
    let log = out.path().join("latency.hlog");
    let json = out.path().join("report.json");
    report.write_histogram_log(&log).unwrap();
    report.write_json(&json).unwrap();
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(log_text.contains("#[StartTime:"), "{log_text}");
    assert!(log_text.contains("HIST"), "{log_text}");
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(value["protocol"], "http");
    assert_eq!(value["requests_completed"], report.requests_completed);
}
