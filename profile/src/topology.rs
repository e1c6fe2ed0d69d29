//! `topology`: services and RPC edges of a multi-tier application.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Histogram;

/// A directed graph of services; service ids are anonymous (`s0`, `s1`, …).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Topology {
    /// Services.
    pub services: Vec<Service>,
    /// RPC edges between them.
    pub edges: Vec<RpcEdge>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Service {
    /// Anonymous id.
    pub id: String,
    /// Whether this profile describes this service.
    pub this_profile: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RpcEdge {
    /// Calling service id.
    pub from: String,
    /// Called service id.
    pub to: String,
    /// Calls per request of the calling service.
    pub calls_per_request: f64,
    /// Request payload sizes, bytes.
    pub request_bytes: Histogram,
    /// Response payload sizes, bytes.
    pub response_bytes: Histogram,
}
