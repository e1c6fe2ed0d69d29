//! `memory`: sizes and the page-level working set.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Memory {
    /// Resident set at the end of the window, bytes, over all processes.
    pub rss_bytes: u64,
    /// Peak resident set, bytes.
    pub peak_rss_bytes: u64,
    /// Virtual size, bytes.
    pub vm_bytes: u64,
    /// Bytes of pages referenced during the window (clear_refs, then `Referenced` of smaps_rollup).
    pub working_set_bytes: u64,
    /// How `working_set_bytes` was measured.
    pub working_set_source: String,
    /// Mapped bytes by kind.
    pub mappings: Mappings,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Mappings {
    /// Executable file-backed mappings (code).
    pub code_bytes: u64,
    /// Other file-backed mappings.
    pub file_bytes: u64,
    /// The heap.
    pub heap_bytes: u64,
    /// Anonymous mappings other than heap and stacks.
    pub anon_bytes: u64,
    /// Stacks.
    pub stack_bytes: u64,
    /// Number of mappings.
    pub count: u64,
}
