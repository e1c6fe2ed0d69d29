//! Writing a clone directory safely: everything goes into a temporary directory next to the target,
//! which is renamed into place only when complete, so a failure never leaves a half-written clone that
//! looks finished; an existing directory is replaced only if it is itself a ditto clone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// File that marks a directory as a generated clone (and so safe to replace).
pub const MARKER: &str = ".ditto-clone";

fn sibling(target: &Path, tag: &str) -> Result<PathBuf> {
    let name = target
        .file_name()
        .and_then(|n| n.to_str())
        .context("the output path has no final component")?;
    let parent = target.parent().unwrap_or(Path::new(""));
    Ok(parent.join(format!(".{name}.{tag}-{}", std::process::id())))
}

/// Checks that `target` may be (re)written: absent, an empty directory, or a previous clone.
pub fn check_target(target: &Path) -> Result<()> {
    match std::fs::symlink_metadata(target) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot inspect {}", target.display())),
        Ok(m) if !m.is_dir() => bail!(
            "{} exists and is not a directory; refusing to overwrite it",
            target.display()
        ),
        Ok(_) => {
            let empty = std::fs::read_dir(target)
                .with_context(|| format!("cannot read {}", target.display()))?
                .next()
                .is_none();
            if empty || target.join(MARKER).is_file() {
                Ok(())
            } else {
                bail!(
                    "{} exists and is not a ditto clone (no {MARKER} file); refusing to overwrite it",
                    target.display()
                )
            }
        }
    }
}

/// Writes `files` (relative path → bytes) as the directory `target`, atomically replacing a previous
/// clone there.
pub fn write_clone(target: &Path, files: &BTreeMap<String, Vec<u8>>) -> Result<()> {
    check_target(target)?;
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let tmp = sibling(target, "tmp")?;
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp)
            .with_context(|| format!("cannot remove stale {}", tmp.display()))?;
    }
    let result = (|| -> Result<()> {
        for (rel, bytes) in files {
            let path = tmp.join(rel);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            std::fs::write(&path, bytes)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        if target.exists() {
            let old = sibling(target, "old")?;
            std::fs::rename(target, &old)
                .with_context(|| format!("cannot move the previous {} aside", target.display()))?;
            if let Err(e) = std::fs::rename(&tmp, target) {
                // Put the previous clone back: the user keeps a complete directory either way.
                let _ = std::fs::rename(&old, target);
                return Err(e).with_context(|| format!("cannot rename into {}", target.display()));
            }
            std::fs::remove_dir_all(&old)
                .with_context(|| format!("cannot remove the previous clone {}", old.display()))?;
        } else {
            std::fs::rename(&tmp, target)
                .with_context(|| format!("cannot rename into {}", target.display()))?;
        }
        Ok(())
    })();
    if result.is_err() && tmp.exists() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

/// Replaces one file of a finished clone atomically (temporary file, then rename).
pub fn replace_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
}
