//! The profile contract: the committed JSON Schema matches the types, every field is documented, and
//! loading refuses what it cannot read with a message that names the problem.
//! Re-bless the schema after changing the types: `DITTO_BLESS=1 cargo test -p ditto-profile`.

use std::path::Path;

use ditto_profile::*;

fn schema_path() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/profile.schema.json")
}

#[test]
fn committed_schema_matches_the_types() {
    let generated = serde_json::to_string_pretty(&json_schema()).expect("schema serialises") + "\n";
    if std::env::var_os("DITTO_BLESS").is_some() {
        std::fs::write(schema_path(), &generated).expect("bless the schema");
    }
    let committed = std::fs::read_to_string(schema_path()).expect("committed schema exists");
    assert!(
        committed == generated,
        "profile/schema/profile.schema.json is stale: run DITTO_BLESS=1 cargo test -p ditto-profile"
    );
}

/// Walks the schema and returns the paths of properties without a description.
fn undocumented(value: &serde_json::Value, path: &str, out: &mut Vec<String>) {
    if let Some(obj) = value.as_object() {
        if let Some(props) = obj.get("properties").and_then(|p| p.as_object()) {
            for (name, prop) in props {
                if prop.get("description").is_none() {
                    out.push(format!("{path}.{name}"));
                }
            }
        }
        for (k, v) in obj {
            undocumented(v, &format!("{path}/{k}"), out);
        }
    }
}

#[test]
fn every_field_is_documented() {
    let mut missing = Vec::new();
    undocumented(&json_schema(), "#", &mut missing);
    assert!(missing.is_empty(), "fields without docs: {missing:#?}");
}

pub fn sample() -> Profile {
    Profile {
        schema_version: Profile::current_version(),
        generator: Generator {
            tool: "ditto".into(),
            version: "0.1.0".into(),
        },
        conditions: Conditions {
            mode: ProfileMode::Attach,
            collector: Collector::Bpftrace,
            target: Some("memcached".into()),
            duration_s: 10.0,
            requests: 1000,
            requests_source: RequestsSource::LoadGenerator,
            load: None,
            processes: 1,
            threads: 2,
            partial: None,
            overhead: None,
            warnings: vec![],
        },
        threads: Threads {
            processes: vec![ProcessGroup {
                id: "p0".into(),
                role: ProcessRole::Single,
                count: 1,
            }],
            clusters: vec![ThreadCluster {
                id: "c0".into(),
                process: "p0".into(),
                role: ThreadRole::NetworkWorker,
                threads: 2,
                scaling: ThreadScaling::Fixed,
                lifetime: Lifetime::LongLived,
                triggers: vec![Trigger::Epoll],
                woken_by: [("external".to_string(), 1.0)].into_iter().collect(),
                cpu_user_s_per_request: 1e-5,
                cpu_sys_s_per_request: 2e-5,
                syscalls_per_request: 3.0,
            }],
        },
        network: Network {
            server: ServerModel {
                io: IoModel::Epoll,
                nonblocking: true,
                accept: AcceptModel::WorkersAccept,
                acceptor_cluster: Some("c0".into()),
                worker_cluster: Some("c0".into()),
                workers: 2,
                multi_process: false,
            },
            listen: vec![],
            connections_accepted: 8,
            connections_open: 8,
            framing: Framing::Line,
            framing_source: "target spec".into(),
            bytes_in_per_request: 40.0,
            bytes_out_per_request: 4200.0,
            read_sizes: Histogram::from_log2_buckets("bytes", [(6, 1000)]),
            write_sizes: Histogram::from_log2_buckets("bytes", [(13, 1000)]),
            connection_options: None,
            request_classes: Vec::new(),
        },
        syscalls: Syscalls {
            per_request: 3.0,
            clusters: vec![ClusterSyscalls {
                cluster: "c0".into(),
                calls: vec![SyscallStat {
                    name: "read".into(),
                    per_request: 1.0,
                    count: 1000,
                    bytes: Some(Histogram::from_log2_buckets("bytes", [(6, 1000)])),
                    ..SyscallStat::default()
                }],
            }],
            at_second_load: Some(SecondLoadSyscalls {
                offered_rate: 500.0,
                achieved_rate: 498.5,
                duration_s: 10.0,
                requests: 4985,
                connections: Some(8),
                clusters: vec![ClusterSyscalls {
                    cluster: "c0".into(),
                    calls: vec![SyscallStat {
                        name: "read".into(),
                        per_request: 1.2,
                        count: 5982,
                        ..SyscallStat::default()
                    }],
                }],
            }),
            at_second_load_short: vec![SecondLoadSyscalls {
                offered_rate: 500.0,
                achieved_rate: 499.0,
                duration_s: 5.0,
                requests: 2495,
                connections: Some(8),
                clusters: vec![ClusterSyscalls {
                    cluster: "c0".into(),
                    calls: vec![SyscallStat {
                        name: "read".into(),
                        per_request: 1.24,
                        count: 3094,
                        ..SyscallStat::default()
                    }],
                }],
            }],
        },
        counters: Counters::default(),
        memory: Memory::default(),
        body: None,
        topology: None,
    }
}

#[test]
fn a_profile_round_trips_through_json() {
    let p = sample();
    let back = Profile::from_json(&p.to_json(), "test").expect("round trip");
    assert_eq!(back, p);
}

#[test]
fn another_major_version_is_refused_with_what_to_do() {
    let text = sample().to_json().replace(
        &format!("\"schema_version\": \"{}\"", Profile::current_version()),
        "\"schema_version\": \"2.3\"",
    );
    let err = Profile::from_json(&text, "old.json")
        .unwrap_err()
        .to_string();
    assert!(err.contains("2.3") && err.contains("re-profile"), "{err}");
}

#[test]
fn a_profile_of_minor_version_0_without_a_second_load_is_read() {
    let mut value: serde_json::Value = serde_json::from_str(&sample().to_json()).expect("json");
    value["schema_version"] = "1.0".into();
    let syscalls = value["syscalls"].as_object_mut().expect("syscalls");
    syscalls.remove("at_second_load");
    syscalls.remove("at_second_load_short");
    let p = Profile::from_json(&value.to_string(), "older.json").expect("1.0 is readable");
    assert!(p.syscalls.at_second_load.is_none());
}

#[test]
fn a_second_load_naming_an_unknown_cluster_is_refused_with_its_field() {
    let mut p = sample();
    if let Some(s) = p.syscalls.at_second_load.as_mut() {
        s.clusters[0].cluster = "c9".into();
    }
    let err = Profile::from_json(&p.to_json(), "bad.json")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("syscalls.at_second_load.clusters[0].cluster") && err.contains("c9"),
        "{err}"
    );
}

#[test]
fn a_profile_of_minor_version_1_without_connections_or_a_short_window_is_read() {
    let mut value: serde_json::Value = serde_json::from_str(&sample().to_json()).expect("json");
    value["schema_version"] = "1.1".into();
    let syscalls = value["syscalls"].as_object_mut().expect("syscalls");
    syscalls.remove("at_second_load_short");
    syscalls["at_second_load"]
        .as_object_mut()
        .expect("second load")
        .remove("connections");
    let p = Profile::from_json(&value.to_string(), "older.json").expect("1.1 is readable");
    assert!(p.syscalls.at_second_load_short.is_empty());
    assert_eq!(p.syscalls.at_second_load.map(|s| s.connections), Some(None));
}

#[test]
fn a_short_window_without_its_long_window_is_refused_with_its_field() {
    let mut p = sample();
    p.syscalls.at_second_load = None;
    let err = Profile::from_json(&p.to_json(), "bad.json")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("syscalls.at_second_load_short") && err.contains("at_second_load"),
        "{err}"
    );
}

#[test]
fn a_short_window_naming_an_unknown_cluster_is_refused_with_its_field() {
    let mut p = sample();
    if let Some(s) = p.syscalls.at_second_load_short.first_mut() {
        s.clusters[0].cluster = "c7".into();
    }
    let err = Profile::from_json(&p.to_json(), "bad.json")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("syscalls.at_second_load_short[0].clusters[0].cluster") && err.contains("c7"),
        "{err}"
    );
}

#[test]
fn a_newer_minor_version_with_extra_fields_is_read() {
    let mut value: serde_json::Value = serde_json::from_str(&sample().to_json()).expect("json");
    value["schema_version"] = "1.7".into();
    value["conditions"]["added_in_a_later_minor"] = 5.into();
    Profile::from_json(&value.to_string(), "newer.json").expect("minor versions are compatible");
}

#[test]
fn a_malformed_field_is_named() {
    let mut value: serde_json::Value = serde_json::from_str(&sample().to_json()).expect("json");
    value["network"]["server"]["io"] = "carrier-pigeon".into();
    let err = Profile::from_json(&value.to_string(), "bad.json")
        .unwrap_err()
        .to_string();
    assert!(err.contains("network.server.io"), "{err}");
}

#[test]
fn rep_counts_by_an_unknown_operand_or_of_a_bad_shape_are_named() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles/nginx.json");
    let text = std::fs::read_to_string(&path).expect("committed nginx profile");
    let value: serde_json::Value = serde_json::from_str(&text).expect("json");
    let hist = |lo: u64, hi: u64| serde_json::json!({"unit": "count", "bins": [{"lo": lo, "hi": hi, "count": 3}]});
    for (by, says) in [
        (
            serde_json::json!({"store": hist(128, 256), "fill": hist(1, 2)}),
            "rep_counts_by_operand.fill",
        ),
        (
            serde_json::json!({"rmw": hist(8, 2)}),
            "rep_counts_by_operand.rmw",
        ),
    ] {
        let mut v = value.clone();
        v["body"]["clusters"][0]["rep_counts_by_operand"] = by;
        let err = Profile::from_json(&v.to_string(), "bad.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{err}");
    }
    // Good counts load and survive a round trip.
    let mut v = value.clone();
    v["body"]["clusters"][0]["rep_counts_by_operand"] =
        serde_json::json!({"store": hist(128, 256), "rmw": hist(1, 8)});
    let p = Profile::from_json(&v.to_string(), "ok.json").expect("loads");
    let again = Profile::from_json(&p.to_json(), "again.json").expect("round trip");
    let by = |p: &Profile| {
        p.body.as_ref().expect("body").clusters[0]
            .rep_counts_by_operand
            .clone()
    };
    assert_eq!(by(&again), by(&p));
    assert_eq!(by(&p).map(|m| m.len()), Some(2));
}

#[test]
fn a_majority_taken_of_the_wrong_shape_is_named() {
    // A recorded profile (nginx, profiled by `scripts/profile-examples.sh nginx`).
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiles/nginx.json");
    let text = std::fs::read_to_string(&path).expect("committed nginx profile");
    let value: serde_json::Value = serde_json::from_str(&text).expect("json");
    let recorded = Profile::from_json(&text, "nginx.json").expect("loads");
    let b = &recorded.body.as_ref().expect("body").clusters[0].branches;
    let share = b.majority_taken_share().expect("recorded");
    assert!(share > 0.0 && share < 1.0, "{share}");
    for (bins, says) in [
        (serde_json::json!([0.5, 0.5, 0.5]), "has 3 bins, not 11"),
        (
            serde_json::json!([0.0, 0.0, 0.0, 0.0, 1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
            "holds 1.5",
        ),
    ] {
        let mut v = value.clone();
        v["body"]["clusters"][0]["branches"]["majority_taken"] = bins;
        let err = Profile::from_json(&v.to_string(), "bad.json")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("body.clusters[0].branches.majority_taken") && err.contains(says),
            "{err}"
        );
    }
}

#[test]
fn a_request_class_with_a_share_above_one_is_named() {
    let mut value: serde_json::Value = serde_json::from_str(&sample().to_json()).expect("json");
    value["network"]["request_classes"] = serde_json::json!([
        {"key_hash": 1, "share": 0.25, "mean_response_bytes": 100.0},
        {"key_hash": 2, "share": 1.5, "mean_response_bytes": 100.0}
    ]);
    let err = Profile::from_json(&value.to_string(), "bad.json")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("network.request_classes[1].share") && err.contains("1.5"),
        "{err}"
    );
    // The same classes with a valid share load, and survive a round trip.
    value["network"]["request_classes"][1]["share"] = serde_json::json!(0.75);
    let p = Profile::from_json(&value.to_string(), "ok.json").expect("loads");
    assert_eq!(p.network.request_classes.len(), 2);
    let again = Profile::from_json(&p.to_json(), "again.json").expect("round trip");
    assert_eq!(again.network.request_classes, p.network.request_classes);
}

#[test]
fn a_dangling_cluster_reference_is_named() {
    let mut p = sample();
    p.syscalls.clusters[0].cluster = "c9".into();
    let err = Profile::from_json(&p.to_json(), "x")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("syscalls.clusters[0].cluster") && err.contains("c9"),
        "{err}"
    );
}

#[test]
fn not_a_profile_is_said_plainly() {
    let err = Profile::from_json("{\"hello\": 1}", "x.json")
        .unwrap_err()
        .to_string();
    assert!(err.contains("schema_version"), "{err}");
    let err = Profile::from_json("not json", "x.json")
        .unwrap_err()
        .to_string();
    assert!(err.contains("not a JSON profile"), "{err}");
}

#[test]
fn save_writes_atomically_and_leaves_no_temporary() {
    let dir = std::env::temp_dir().join(format!("ditto-profile-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("p.json");
    sample().save(&path).expect("save");
    assert!(!dir.join("p.json.tmp").exists());
    assert_eq!(Profile::load(&path).expect("load"), sample());
    let _ = std::fs::remove_dir_all(&dir);
}
