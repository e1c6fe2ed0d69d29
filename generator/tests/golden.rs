//! Golden clone: the files generated from a hand-written profile with a body are compared byte for
//! byte with the committed ones under tests/golden/kv/ (the copied runtime is left out: it changes
//! with the runtime, not with the generator). Re-bless: `DITTO_BLESS=1 cargo test -p ditto-generator`.

mod common;

use std::collections::BTreeSet;

use ditto_generator::Knobs;

#[test]
fn kv_clone_matches_golden() {
    let clone = common::render(&common::fixture_path("kv.json"), "kv", 1, &Knobs::default());
    let golden = common::manifest().join("tests/golden/kv");
    let generated: BTreeSet<&String> = clone
        .files
        .keys()
        .filter(|k| !k.starts_with("runtime/"))
        .collect();
    if std::env::var_os("DITTO_BLESS").is_some() {
        let _ = std::fs::remove_dir_all(&golden);
        for f in &generated {
            let p = golden.join(f);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, &clone.files[*f]).expect("write golden");
        }
        return;
    }
    let mut committed = BTreeSet::new();
    let mut stack = vec![golden.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("golden dir (bless with DITTO_BLESS=1)") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(&golden).expect("prefix");
                committed.insert(rel.to_string_lossy().into_owned());
            }
        }
    }
    let generated_names: BTreeSet<String> = generated.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        generated_names, committed,
        "file set differs from the golden (re-bless with DITTO_BLESS=1)"
    );
    for f in generated {
        let want = std::fs::read(golden.join(f)).expect("golden file");
        assert!(
            clone.files[f] == want,
            "{f} differs from tests/golden/kv/{f} (re-bless with DITTO_BLESS=1 if intended)"
        );
    }
}

#[test]
fn runtime_is_copied_verbatim() {
    let clone = common::render(&common::fixture_path("kv.json"), "kv", 1, &Knobs::default());
    let runtime = common::manifest().join("../runtime");
    let mut n = 0;
    for (path, contents) in ditto_generator::RUNTIME_FILES {
        let on_disk = std::fs::read_to_string(runtime.join(path.trim_start_matches("runtime/")))
            .expect("runtime file");
        assert_eq!(on_disk, *contents, "{path} is stale: rebuild");
        assert_eq!(clone.files[*path], contents.as_bytes());
        n += 1;
    }
    assert!(n >= 2, "the runtime table is empty");
    assert!(ditto_generator::RUNTIME_FILES
        .iter()
        .any(|(p, _)| *p == "runtime/include/ditto_runtime.h"));
}
