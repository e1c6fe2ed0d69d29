//! Embeds the C runtime (runtime/include/*.h, runtime/src/*.c) into the generator, so that every clone
//! carries the runtime it was generated against. The directories are walked at build time (not listed by
//! hand) so a file the runtime gains is picked up without touching the generator.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let runtime = manifest.join("..").join("runtime");
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for (dir, ext) in [("include", "h"), ("src", "c")] {
        let d = runtime.join(dir);
        // Directory mtimes change when files are added or removed: that re-runs this script.
        println!("cargo:rerun-if-changed={}", d.display());
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_file() && path.extension().and_then(|e| e.to_str()) == Some(ext) {
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default()
                    .to_string();
                files.push((format!("runtime/{dir}/{name}"), path));
            }
        }
    }
    // Sorted so that the table (and so every clone) does not depend on directory order.
    files.sort();
    let mut out = String::from(
        "/// The runtime's files as (path inside the clone, contents), sorted by path.\n\
         pub static RUNTIME_FILES: &[(&str, &str)] = &[\n",
    );
    for (rel, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let abs = canonical(path);
        let _ = writeln!(out, "    ({rel:?}, include_str!({abs:?})),");
    }
    out.push_str("];\n");
    let dest = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("runtime_files.rs");
    std::fs::write(&dest, out).expect("write runtime_files.rs");
}

fn canonical(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}
