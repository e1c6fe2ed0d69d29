//! Platform cache geometries, kept as data files in `validation/platforms/`.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::MeasureError;

/// One cache level: total bytes, ways, line bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CacheGeometry {
    pub size: u64,
    pub assoc: u32,
    pub line: u32,
}

impl CacheGeometry {
    /// Cachegrind's `SIZE,ASSOC,LINE` argument form.
    pub fn cachegrind_arg(&self) -> String {
        format!("{},{},{}", self.size, self.assoc, self.line)
    }

    fn check(&self, what: &str) -> Result<(), String> {
        let sets = self.size / (u64::from(self.assoc.max(1)) * u64::from(self.line.max(1)));
        // Cachegrind's own limits on this host (DESIGN.md §9).
        if self.line < 32 || !self.line.is_power_of_two() {
            return Err(format!(
                "{what}: line size {} must be a power of two ≥ 32",
                self.line
            ));
        }
        if self.size <= u64::from(self.line) || self.size > 1 << 30 {
            return Err(format!(
                "{what}: size {} must be above the line size and at most 1 GiB",
                self.size
            ));
        }
        if sets == 0
            || !sets.is_power_of_two()
            || sets * u64::from(self.assoc) * u64::from(self.line) != self.size
        {
            return Err(format!(
                "{what}: size / (assoc × line) must be a power-of-two number of sets (got {} B, {}-way, {} B lines)",
                self.size, self.assoc, self.line
            ));
        }
        Ok(())
    }
}

/// A machine's cache hierarchy.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Platform {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub l1i: CacheGeometry,
    pub l1d: CacheGeometry,
    pub l2: CacheGeometry,
    pub llc: CacheGeometry,
}

impl Platform {
    pub fn load(path: &Path) -> Result<Platform, MeasureError> {
        let text = std::fs::read_to_string(path).map_err(|cause| MeasureError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        let platform: Platform = toml::from_str(&text).map_err(|e| MeasureError::Platform {
            path: path.to_path_buf(),
            message: e.message().to_string(),
        })?;
        for (what, g) in [
            ("l1i", platform.l1i),
            ("l1d", platform.l1d),
            ("l2", platform.l2),
            ("llc", platform.llc),
        ] {
            g.check(what).map_err(|message| MeasureError::Platform {
                path: path.to_path_buf(),
                message,
            })?;
        }
        Ok(platform)
    }

    /// The folder of bundled platform files.
    pub fn bundled_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../platforms")
    }

    /// Loads a bundled platform by name (`epyc-host`) or a platform file by path.
    pub fn by_name_or_path(name_or_path: &str) -> Result<Platform, MeasureError> {
        let as_path = Path::new(name_or_path);
        if as_path.extension().is_some_and(|e| e == "toml") {
            return Platform::load(as_path);
        }
        Platform::load(&Self::bundled_dir().join(format!("{name_or_path}.toml")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_platforms_load_and_obey_cachegrind_limits() {
        let p = Platform::by_name_or_path("epyc-host").expect("bundled platform");
        assert_eq!(p.l1d.cachegrind_arg(), "32768,8,64");
        assert_eq!(p.llc.size, 32 << 20);
    }

    #[test]
    fn every_bundled_platform_file_loads() {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(Platform::bundled_dir()).expect("platforms folder") {
            let path = entry.expect("entry").path();
            if path.extension().is_some_and(|e| e == "toml") {
                let p = Platform::load(&path).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(
                    Some(p.name.as_str()),
                    path.file_stem().and_then(|s| s.to_str()),
                    "a platform's name is its file name"
                );
                names.push(p.name);
            }
        }
        for paper in ["paper-a", "paper-b", "paper-c"] {
            assert!(names.iter().any(|n| n == paper), "{paper} missing");
        }
        // Table 1's sizes, within cachegrind's power-of-two-sets limit (A's LLC is 30 of 30.25 MiB).
        let a = Platform::by_name_or_path("paper-a").expect("paper-a");
        assert_eq!(a.l2.size, 1 << 20);
        assert_eq!(a.llc.size, 30 << 20);
        assert_eq!(
            Platform::by_name_or_path("paper-b").expect("b").llc.size,
            25 << 20
        );
        assert_eq!(
            Platform::by_name_or_path("paper-c").expect("c").llc.size,
            8 << 20
        );
    }

    #[test]
    fn non_power_of_two_sets_are_rejected() {
        let g = CacheGeometry {
            size: 30 * 1024 * 1024,
            assoc: 11,
            line: 64,
        };
        assert!(g.check("llc").unwrap_err().contains("power-of-two"));
    }
}
