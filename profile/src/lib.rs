//! The ditto profile: the one contract between the profilers and everything after them (generator,
//! tuner, validation).
//!
//! Design trade-off: the profile is plain serde data with a generated JSON Schema, versioned as
//! `MAJOR.MINOR`. Readers refuse another major version outright (the meaning of fields changed) but
//! accept any minor version of their major, ignoring fields they do not know (minor versions only add
//! optional fields). That keeps old clones regenerable from new profiles without a migration layer, at the
//! cost of not catching misspelt fields in hand-edited profiles — the JSON Schema
//! (`profile/schema/profile.schema.json`) is there for that.
//!
//! A profile holds statistics only: no code bytes, no addresses of the original, no symbol names, no
//! strings (thread names, paths, command lines). Everything per request is divided by
//! `conditions.requests`. This crate depends on no collector, so tools can read and write profiles
//! without the profilers.

mod body;
mod conditions;
mod counters;
pub mod diff;
mod histogram;
mod memory;
mod network;
mod syscalls;
mod threads;
mod topology;

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use body::{
    Body, Branches, ClusterBody, Dependencies, HitCurve, HitPoint, IndirectBranches, MixShare,
};
pub use conditions::{
    Collector, Conditions, LoadConditions, Overhead, ProfileMode, RequestsSource,
};
pub use counters::{Counters, SoftwareCounters};
pub use histogram::{Bin, Histogram};
pub use memory::{Mappings, Memory};
pub use network::{
    request_key_hash, AcceptModel, Framing, IoModel, ListenSocket, Network, RequestClass,
    ServerModel, SocketOptions,
};
pub use syscalls::{ClusterSyscalls, SecondLoadSyscalls, SyscallStat, Syscalls};
pub use threads::{
    Lifetime, ProcessGroup, ProcessRole, ThreadCluster, ThreadRole, ThreadScaling, Threads, Trigger,
};
pub use topology::{RpcEdge, Service, Topology};

/// Major version: a reader refuses profiles of any other major version.
pub const SCHEMA_MAJOR: u32 = 1;
/// Minor version: added optional fields only.
pub const SCHEMA_MINOR: u32 = 2;

/// The whole profile of one service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Profile {
    /// `MAJOR.MINOR` of this schema.
    pub schema_version: String,
    /// The tool that wrote the profile.
    pub generator: Generator,
    /// How, when and under what load the profile was taken.
    pub conditions: Conditions,
    /// Thread model.
    pub threads: Threads,
    /// Network model.
    pub network: Network,
    /// Syscall distributions per thread cluster, per request.
    pub syscalls: Syscalls,
    /// Software counters per request.
    pub counters: Counters,
    /// Memory sizes and working set.
    pub memory: Memory,
    /// User-space behaviour; filled by the launch-mode profiler.
    pub body: Option<Body>,
    /// Services and RPC edges of a multi-tier application.
    pub topology: Option<Topology>,
}

/// The tool that wrote a profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Generator {
    /// Always `ditto`.
    pub tool: String,
    /// Its version.
    pub version: String,
}

/// Why a profile could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile {}: {cause}", path.display())]
    Read {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("cannot write profile {}: {cause}", path.display())]
    Write {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{origin}: not a JSON profile: {message}")]
    NotJson { origin: String, message: String },
    #[error("{origin}: no schema_version field: is this a ditto profile?")]
    NoVersion { origin: String },
    #[error(
        "{origin}: schema version {found} is not readable by this ditto (reads {SCHEMA_MAJOR}.x): \
         re-profile the target with this version, or use the ditto that wrote it"
    )]
    WrongMajor { origin: String, found: String },
    #[error("{origin}: field `{field}`: {message}")]
    Field {
        origin: String,
        field: String,
        message: String,
    },
}

impl Profile {
    /// The version string this crate writes.
    pub fn current_version() -> String {
        format!("{SCHEMA_MAJOR}.{SCHEMA_MINOR}")
    }

    /// Parses a profile, checking the major version before anything else so that an old or future
    /// profile is reported as such rather than as a missing field. `origin` names the source in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| ProfileError::NotJson {
                origin: origin.to_string(),
                message: e.to_string(),
            })?;
        let version = value
            .get("schema_version")
            .and_then(|v| v.as_str())
            .ok_or_else(|| ProfileError::NoVersion {
                origin: origin.to_string(),
            })?;
        let major = version
            .split('.')
            .next()
            .and_then(|m| m.parse::<u32>().ok());
        if major != Some(SCHEMA_MAJOR) {
            return Err(ProfileError::WrongMajor {
                origin: origin.to_string(),
                found: version.to_string(),
            });
        }
        let profile: Profile =
            serde_path_to_error::deserialize(value).map_err(|e| ProfileError::Field {
                origin: origin.to_string(),
                field: e.path().to_string(),
                message: e.inner().to_string(),
            })?;
        profile
            .check()
            .map_err(|(field, message)| ProfileError::Field {
                origin: origin.to_string(),
                field,
                message,
            })?;
        Ok(profile)
    }

    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|cause| ProfileError::Read {
            path: path.to_path_buf(),
            cause,
        })?;
        Self::from_json(&text, &path.display().to_string())
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        // Plain data with string keys and finite numbers: serialisation cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Writes the profile atomically (temporary file, then rename), so a crash never leaves half a profile.
    pub fn save(&self, path: &Path) -> Result<(), ProfileError> {
        let err = |cause| ProfileError::Write {
            path: path.to_path_buf(),
            cause,
        };
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, self.to_json()).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }

    /// Invariants serde cannot express. Returns the offending field path and what is wrong.
    pub fn check(&self) -> Result<(), (String, String)> {
        let c = &self.conditions;
        if !(c.duration_s.is_finite() && c.duration_s >= 0.0) {
            return Err((
                "conditions.duration_s".into(),
                "must be a non-negative number".into(),
            ));
        }
        let cluster_ids: Vec<&str> = self
            .threads
            .clusters
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        for (i, cs) in self.syscalls.clusters.iter().enumerate() {
            if !cluster_ids.contains(&cs.cluster.as_str()) {
                return Err((
                    format!("syscalls.clusters[{i}].cluster"),
                    format!("'{}' is not a cluster in threads.clusters", cs.cluster),
                ));
            }
            for (j, call) in cs.calls.iter().enumerate() {
                let at = |f: &str| format!("syscalls.clusters[{i}].calls[{j}].{f}");
                if !(call.per_request.is_finite() && call.per_request >= 0.0) {
                    return Err((
                        at("per_request"),
                        "must be a finite non-negative number".into(),
                    ));
                }
                for (name, h) in [
                    ("bytes", &call.bytes),
                    ("size_arg", &call.size_arg),
                    ("offsets", &call.offsets),
                    ("duration", &call.duration),
                ] {
                    if let Some(h) = h {
                        h.check().map_err(|m| (at(name), m))?;
                    }
                }
            }
        }
        let short = self.syscalls.at_second_load_short.iter();
        let windows = self
            .syscalls
            .at_second_load
            .iter()
            .map(|s| ("at_second_load".to_string(), s))
            .chain(
                short
                    .enumerate()
                    .map(|(i, s)| (format!("at_second_load_short[{i}]"), s)),
            );
        for (field, second) in windows {
            let at = |f: &str| format!("syscalls.{field}.{f}");
            if !(second.achieved_rate.is_finite() && second.achieved_rate > 0.0) {
                return Err((at("achieved_rate"), "must be a positive number".into()));
            }
            for (i, cs) in second.clusters.iter().enumerate() {
                if !cluster_ids.contains(&cs.cluster.as_str()) {
                    return Err((
                        at(&format!("clusters[{i}].cluster")),
                        format!("'{}' is not a cluster in threads.clusters", cs.cluster),
                    ));
                }
                for (j, call) in cs.calls.iter().enumerate() {
                    if !(call.per_request.is_finite() && call.per_request >= 0.0) {
                        return Err((
                            at(&format!("clusters[{i}].calls[{j}].per_request")),
                            "must be a finite non-negative number".into(),
                        ));
                    }
                }
            }
        }
        if !self.syscalls.at_second_load_short.is_empty() && self.syscalls.at_second_load.is_none()
        {
            return Err((
                "syscalls.at_second_load_short".into(),
                "needs syscalls.at_second_load (it is the same load over shorter windows)".into(),
            ));
        }
        for h in [
            ("network.read_sizes", &self.network.read_sizes),
            ("network.write_sizes", &self.network.write_sizes),
        ] {
            h.1.check().map_err(|m| (h.0.to_string(), m))?;
        }
        for (i, class) in self.network.request_classes.iter().enumerate() {
            let at = |f: &str| format!("network.request_classes[{i}].{f}");
            if !(0.0..=1.0).contains(&class.share) {
                return Err((
                    at("share"),
                    format!("is {}, not a share between 0 and 1", class.share),
                ));
            }
            if !(class.mean_response_bytes.is_finite() && class.mean_response_bytes >= 0.0) {
                return Err((
                    at("mean_response_bytes"),
                    "must be a finite non-negative number".into(),
                ));
            }
        }
        if let Some(body) = &self.body {
            for (i, b) in body.clusters.iter().enumerate() {
                let majority = b.branches.majority_taken.as_deref().unwrap_or_default();
                let indirect = b.branches.indirect.as_ref();
                let changes = indirect.map(|d| d.target_change_rate.as_slice());
                for (name, v) in [
                    ("branches.taken_rate", b.branches.taken_rate.as_slice()),
                    ("branches.transition_rate", &b.branches.transition_rate),
                    ("dependencies.raw", &b.dependencies.raw),
                    ("dependencies.war", &b.dependencies.war),
                    ("dependencies.waw", &b.dependencies.waw),
                    ("branches.majority_taken", majority),
                    (
                        "branches.indirect.target_change_rate",
                        changes.unwrap_or_default(),
                    ),
                ] {
                    if !v.is_empty() && v.len() != 11 {
                        return Err((
                            format!("body.clusters[{i}].{name}"),
                            format!("has {} bins, not 11", v.len()),
                        ));
                    }
                }
                for (operand, h) in b.rep_counts_by_operand.iter().flatten() {
                    let at = format!("body.clusters[{i}].rep_counts_by_operand.{operand}");
                    if !MixShare::OPERANDS.contains(&operand.as_str()) {
                        return Err((
                            at,
                            "is not an operand kind (reg, load, store or rmw)".into(),
                        ));
                    }
                    h.check().map_err(|m| (at, m))?;
                }
                if let Some(bad) = majority.iter().find(|q| !(0.0..=1.0).contains(*q)) {
                    return Err((
                        format!("body.clusters[{i}].branches.majority_taken"),
                        format!("holds {bad}, not a share between 0 and 1"),
                    ));
                }
                if let Some(d) = indirect {
                    if !(0.0..=1.0).contains(&d.mean_target_change_rate) {
                        return Err((
                            format!("body.clusters[{i}].branches.indirect.mean_target_change_rate"),
                            format!(
                                "is {}, not a rate between 0 and 1",
                                d.mean_target_change_rate
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The JSON Schema of [`Profile`], generated from the types and their doc comments.
pub fn json_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(Profile)).unwrap_or_default()
}
