//! Snapshot tests of the analysis over observations recorded from real attach-mode runs
//! (`ditto profile --observations FILE`). Each `tests/fixtures/NAME.observations.json` is analysed and
//! compared with `NAME.profile.json`; re-bless after an intended change with
//! `DITTO_BLESS=1 cargo test -p ditto-profiler --test snapshots`.

use std::path::{Path, PathBuf};

use ditto_profile::{AcceptModel, IoModel, ProcessRole, Profile, ThreadRole};
use ditto_profiler::{analyze::analyze, Observations};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn analyzed(name: &str) -> Profile {
    let path = fixtures().join(format!("{name}.observations.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let obs: Observations = serde_json::from_str(&text).expect("observations parse");
    analyze(&obs)
}

fn check_snapshot(name: &str, profile: &Profile) {
    let path = fixtures().join(format!("{name}.profile.json"));
    let text = profile.to_json();
    if std::env::var_os("DITTO_BLESS").is_some() {
        std::fs::write(&path, &text).expect("bless snapshot");
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        expected == text,
        "{} differs from the analysis of {name}.observations.json; if intended, re-bless with DITTO_BLESS=1",
        path.display()
    );
    // The snapshot is a valid profile of the current schema.
    Profile::from_json(&expected, &path.display().to_string()).expect("snapshot loads");
}

fn roles(p: &Profile) -> Vec<(ThreadRole, u32)> {
    p.threads
        .clusters
        .iter()
        .map(|c| (c.role, c.threads))
        .collect()
}

#[test]
fn memcached_attach_snapshot() {
    let p = analyzed("memcached-attach");
    assert_eq!(p.network.server.io, IoModel::Epoll);
    assert_eq!(p.network.server.accept, AcceptModel::DispatchToWorkers);
    assert!(roles(&p).contains(&(ThreadRole::Acceptor, 1)));
    assert!(roles(&p).contains(&(ThreadRole::NetworkWorker, 4)));
    check_snapshot("memcached-attach", &p);
}

#[test]
fn nginx_attach_snapshot() {
    let p = analyzed("nginx-attach");
    let groups: Vec<(ProcessRole, u32)> = p
        .threads
        .processes
        .iter()
        .map(|g| (g.role, g.count))
        .collect();
    assert_eq!(
        groups,
        vec![(ProcessRole::Master, 1), (ProcessRole::Worker, 1)]
    );
    assert!(p.network.server.multi_process);
    check_snapshot("nginx-attach", &p);
}

#[test]
fn analysis_is_deterministic() {
    assert_eq!(analyzed("memcached-attach"), analyzed("memcached-attach"));
}

#[test]
fn profiles_carry_no_strings_of_the_original() {
    for name in ["memcached-attach", "nginx-attach"] {
        let mut p = analyzed(name);
        // The spec name and the load protocol are ditto's and the user's labels, not the original's.
        p.conditions.target = None;
        p.conditions.load = None;
        let text = p.to_json();
        for needle in [
            "memcached",
            "nginx",
            "mc-worker",
            "/usr/",
            "/tmp/",
            "www-data",
            "/work/",
        ] {
            assert!(
                !text.contains(needle),
                "{name}: profile contains '{needle}'"
            );
        }
    }
}
