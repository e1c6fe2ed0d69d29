//! What the load consists of, per protocol. Embedded in TOML target specs, so every field has a
//! default and unknown fields are rejected (a typo must not silently fall back to a default).

use serde::{Deserialize, Serialize};

use crate::error::LoadError;

/// The requests a run sends. The `protocol` field selects the variant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "protocol", rename_all = "kebab-case")]
pub enum Workload {
    /// memcached text protocol: `get` / `set` over a fixed key space.
    Memcached(MemcachedWorkload),
    /// HTTP/1.1 keep-alive `GET`s over weighted paths.
    Http(HttpWorkload),
    /// The Pix ledger gRPC API (`pix.v1.Ledger`).
    PixGrpc(PixWorkload),
    /// ditto clones' length-prefixed protocol: a u32 big-endian length, then the payload, both
    /// ways (clones of services whose framing is length-prefixed or that ditto cannot speak).
    LengthPrefixed(LengthPrefixedWorkload),
}

impl Workload {
    /// The protocol name, as in the `protocol` field.
    pub fn protocol(&self) -> &'static str {
        match self {
            Workload::Memcached(_) => "memcached",
            Workload::Http(_) => "http",
            Workload::PixGrpc(_) => "pix-grpc",
            Workload::LengthPrefixed(_) => "length-prefixed",
        }
    }

    /// Checks every field's range; `run` and `warm` call this first.
    pub fn validate(&self) -> Result<(), LoadError> {
        match self {
            Workload::Memcached(w) => w.validate(),
            Workload::Http(w) => w.validate(),
            Workload::PixGrpc(w) => w.validate(),
            Workload::LengthPrefixed(w) => w.validate(),
        }
    }
}

/// memcached text protocol workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemcachedWorkload {
    /// Number of distinct keys; each request picks one uniformly at random.
    pub keys: u64,
    /// Exact length of every key in bytes (memcached allows at most 250).
    pub key_size: usize,
    /// Length of every stored value in bytes.
    pub value_size: usize,
    /// Fraction of requests that are `get`s; the rest are `set`s.
    pub get_fraction: f64,
}

impl Default for MemcachedWorkload {
    fn default() -> Self {
        MemcachedWorkload {
            keys: 10_000,
            key_size: 30,
            value_size: 4096,
            get_fraction: 0.9,
        }
    }
}

/// Longest key memcached's text protocol accepts.
pub const MEMCACHED_MAX_KEY: usize = 250;
/// Largest value the generator will send (keeps per-connection buffers bounded).
pub const MEMCACHED_MAX_VALUE: usize = 16 << 20;

impl MemcachedWorkload {
    fn validate(&self) -> Result<(), LoadError> {
        let bad = |reason: String| {
            Err(LoadError::InvalidWorkload {
                protocol: "memcached",
                reason,
            })
        };
        if self.keys == 0 {
            return bad("keys must be at least 1".into());
        }
        if self.key_size == 0 || self.key_size > MEMCACHED_MAX_KEY {
            return bad(format!(
                "key_size must be within 1..={MEMCACHED_MAX_KEY}, got {}",
                self.key_size
            ));
        }
        let digits = crate::protocols::memcached::index_digits(self.keys);
        if self.key_size < digits {
            return bad(format!(
                "key_size {} is too small for {} distinct keys (needs at least {digits} bytes)",
                self.key_size, self.keys
            ));
        }
        if self.value_size > MEMCACHED_MAX_VALUE {
            return bad(format!(
                "value_size must be at most {MEMCACHED_MAX_VALUE}, got {}",
                self.value_size
            ));
        }
        if !(0.0..=1.0).contains(&self.get_fraction) {
            return bad(format!(
                "get_fraction must be within 0..=1, got {}",
                self.get_fraction
            ));
        }
        Ok(())
    }
}

/// HTTP/1.1 workload: keep-alive `GET`s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpWorkload {
    /// Paths to request, each chosen with probability proportional to its weight.
    pub paths: Vec<WeightedPath>,
    /// `Host` header value; defaults to the target's `ip:port`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl Default for HttpWorkload {
    fn default() -> Self {
        HttpWorkload {
            paths: vec![WeightedPath {
                path: "/".into(),
                weight: 1.0,
            }],
            host: None,
        }
    }
}

/// One request path and its relative weight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightedPath {
    /// Request target, starting with `/`.
    pub path: String,
    /// Relative weight (any non-negative number); default 1.
    #[serde(default = "one")]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

impl HttpWorkload {
    fn validate(&self) -> Result<(), LoadError> {
        let bad = |reason: String| {
            Err(LoadError::InvalidWorkload {
                protocol: "http",
                reason,
            })
        };
        if self.paths.is_empty() {
            return bad("paths must not be empty".into());
        }
        for p in &self.paths {
            // The path goes verbatim into the request line: no spaces or control characters.
            if !p.path.starts_with('/') || p.path.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return bad(format!(
                    "path {:?} must start with '/' and contain no spaces or control characters",
                    p.path
                ));
            }
            if !p.weight.is_finite() || p.weight < 0.0 {
                return bad(format!(
                    "weight of {:?} must be a non-negative number, got {}",
                    p.path, p.weight
                ));
            }
        }
        if self.paths.iter().map(|p| p.weight).sum::<f64>() <= 0.0 {
            return bad("at least one path needs a positive weight".into());
        }
        if let Some(host) = &self.host {
            if host.is_empty() || host.bytes().any(|b| b < b' ' || b == 0x7f) {
                return bad(format!(
                    "host {host:?} must be non-empty without control characters"
                ));
            }
        }
        Ok(())
    }
}

/// Pix ledger gRPC workload: the paper's 10% creates, 10% deposits, 80% transfers by default.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PixWorkload {
    /// Accounts created (each with an initial deposit) before warm-up; not measured.
    pub accounts: u64,
    /// Fraction of requests that open a new account with a new Pix key.
    pub create_fraction: f64,
    /// Fraction of requests that deposit into a random account.
    pub deposit_fraction: f64,
    /// Fraction of requests that transfer between two random accounts.
    pub transfer_fraction: f64,
    /// Initial deposit into every population account, in cents.
    pub initial_balance_cents: i64,
    /// Deposits and transfers move a uniform 1..=max_amount_cents.
    pub max_amount_cents: i64,
}

impl Default for PixWorkload {
    fn default() -> Self {
        PixWorkload {
            accounts: 1000,
            create_fraction: 0.1,
            deposit_fraction: 0.1,
            transfer_fraction: 0.8,
            initial_balance_cents: 100_000,
            max_amount_cents: 100,
        }
    }
}

/// Most population accounts a run will create.
pub const PIX_MAX_ACCOUNTS: u64 = 1_000_000;

impl PixWorkload {
    fn validate(&self) -> Result<(), LoadError> {
        let bad = |reason: String| {
            Err(LoadError::InvalidWorkload {
                protocol: "pix-grpc",
                reason,
            })
        };
        if !(2..=PIX_MAX_ACCOUNTS).contains(&self.accounts) {
            return bad(format!(
                "accounts must be within 2..={PIX_MAX_ACCOUNTS} (transfers need two accounts), got {}",
                self.accounts
            ));
        }
        let fractions = [
            ("create_fraction", self.create_fraction),
            ("deposit_fraction", self.deposit_fraction),
            ("transfer_fraction", self.transfer_fraction),
        ];
        for (name, f) in fractions {
            if !(0.0..=1.0).contains(&f) {
                return bad(format!("{name} must be within 0..=1, got {f}"));
            }
        }
        let sum: f64 = fractions.iter().map(|(_, f)| f).sum();
        if (sum - 1.0).abs() > 1e-6 {
            return bad(format!(
                "create_fraction + deposit_fraction + transfer_fraction must be 1, got {sum}"
            ));
        }
        if self.initial_balance_cents < 0 {
            return bad("initial_balance_cents must not be negative".into());
        }
        if self.max_amount_cents < 1 {
            return bad("max_amount_cents must be at least 1".into());
        }
        Ok(())
    }
}

/// Length-prefixed workload: every request is `request_bytes` of payload after its 4-byte length.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LengthPrefixedWorkload {
    /// Payload bytes of every request.
    pub request_bytes: usize,
    /// When set, a response with another payload length is a protocol error. Unset (the default)
    /// accepts any length up to [`LENGTH_PREFIXED_MAX_RESPONSE`]: clones sample their response
    /// sizes from the profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_bytes: Option<u64>,
}

impl Default for LengthPrefixedWorkload {
    fn default() -> Self {
        LengthPrefixedWorkload {
            request_bytes: 64,
            response_bytes: None,
        }
    }
}

/// Largest request payload the generator sends (keeps per-connection buffers bounded).
pub const LENGTH_PREFIXED_MAX_REQUEST: usize = 16 << 20;
/// Largest response payload accepted; a longer announced length is treated as garbage.
pub const LENGTH_PREFIXED_MAX_RESPONSE: u64 = 1 << 30;

impl LengthPrefixedWorkload {
    fn validate(&self) -> Result<(), LoadError> {
        let bad = |reason: String| {
            Err(LoadError::InvalidWorkload {
                protocol: "length-prefixed",
                reason,
            })
        };
        if self.request_bytes > LENGTH_PREFIXED_MAX_REQUEST {
            return bad(format!(
                "request_bytes must be at most {LENGTH_PREFIXED_MAX_REQUEST}, got {}",
                self.request_bytes
            ));
        }
        if let Some(n) = self.response_bytes {
            if n > LENGTH_PREFIXED_MAX_RESPONSE {
                return bad(format!(
                    "response_bytes must be at most {LENGTH_PREFIXED_MAX_RESPONSE}, got {n}"
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcached_toml_with_only_protocol_gets_all_defaults() {
        let w: Workload = toml::from_str(r#"protocol = "memcached""#).unwrap();
        assert_eq!(w, Workload::Memcached(MemcachedWorkload::default()));
        let Workload::Memcached(m) = &w else {
            panic!("wrong variant")
        };
        assert_eq!(
            (m.keys, m.key_size, m.value_size, m.get_fraction),
            (10_000, 30, 4096, 0.9)
        );
        w.validate().unwrap();
    }

    #[test]
    fn http_toml_parses_weighted_paths_and_host() {
        let w: Workload = toml::from_str(
            r#"
            protocol = "http"
            host = "example.test"
            paths = [ { path = "/index.html", weight = 3 }, { path = "/big.bin" } ]
            "#,
        )
        .unwrap();
        let Workload::Http(h) = &w else {
            panic!("wrong variant")
        };
        assert_eq!(h.host.as_deref(), Some("example.test"));
        assert_eq!(h.paths[0].weight, 3.0);
        assert_eq!(h.paths[1].weight, 1.0);
        w.validate().unwrap();
    }

    #[test]
    fn pix_json_parses_with_defaults() {
        let w: Workload = serde_json::from_str(r#"{"protocol":"pix-grpc","accounts":50}"#).unwrap();
        let Workload::PixGrpc(p) = &w else {
            panic!("wrong variant")
        };
        assert_eq!(p.accounts, 50);
        assert_eq!(p.transfer_fraction, 0.8);
        w.validate().unwrap();
    }

    #[test]
    fn length_prefixed_parses_with_defaults_and_round_trips() {
        let w: Workload = toml::from_str(r#"protocol = "length-prefixed""#).unwrap();
        assert_eq!(
            w,
            Workload::LengthPrefixed(LengthPrefixedWorkload::default())
        );
        assert_eq!(w.protocol(), "length-prefixed");
        w.validate().unwrap();
        let pinned: Workload = serde_json::from_str(
            r#"{"protocol":"length-prefixed","request_bytes":10,"response_bytes":20}"#,
        )
        .unwrap();
        let Workload::LengthPrefixed(lp) = &pinned else {
            panic!("wrong variant")
        };
        assert_eq!((lp.request_bytes, lp.response_bytes), (10, Some(20)));
        let text = toml::to_string(&pinned).unwrap();
        assert_eq!(toml::from_str::<Workload>(&text).unwrap(), pinned);
        assert!(serde_json::from_str::<Workload>(
            r#"{"protocol":"length-prefixed","request_byte":10}"#
        )
        .is_err());
        let too_big = Workload::LengthPrefixed(LengthPrefixedWorkload {
            request_bytes: LENGTH_PREFIXED_MAX_REQUEST + 1,
            response_bytes: None,
        });
        assert!(too_big.validate().is_err());
        let too_big = Workload::LengthPrefixed(LengthPrefixedWorkload {
            request_bytes: 1,
            response_bytes: Some(LENGTH_PREFIXED_MAX_RESPONSE + 1),
        });
        assert!(too_big.validate().is_err());
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = toml::from_str::<Workload>("protocol = \"memcached\"\nkey_sise = 10\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("key_sise"), "{err}");
        assert!(toml::from_str::<Workload>(
            "protocol = \"http\"\npaths = [ { path = \"/\", wieght = 2 } ]\n"
        )
        .is_err());
        assert!(
            serde_json::from_str::<Workload>(r#"{"protocol":"pix-grpc","acounts":5}"#).is_err()
        );
    }

    #[test]
    fn unknown_protocol_is_rejected() {
        assert!(toml::from_str::<Workload>("protocol = \"redis\"").is_err());
        assert!(toml::from_str::<Workload>("keys = 5").is_err());
    }

    #[test]
    fn workload_round_trips_through_json_and_toml() {
        let w = Workload::Http(HttpWorkload {
            paths: vec![WeightedPath {
                path: "/a".into(),
                weight: 2.0,
            }],
            host: Some("h".into()),
        });
        let json = serde_json::to_string(&w).unwrap();
        assert!(json.contains(r#""protocol":"http""#), "{json}");
        assert_eq!(serde_json::from_str::<Workload>(&json).unwrap(), w);
        let toml_text = toml::to_string(&w).unwrap();
        assert_eq!(toml::from_str::<Workload>(&toml_text).unwrap(), w);
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let mc = |f: fn(&mut MemcachedWorkload)| {
            let mut m = MemcachedWorkload::default();
            f(&mut m);
            Workload::Memcached(m).validate()
        };
        assert!(mc(|m| m.key_size = 251).is_err());
        assert!(mc(|m| m.key_size = 0).is_err());
        assert!(mc(|m| {
            m.keys = 1_000_000;
            m.key_size = 5
        })
        .is_err());
        assert!(mc(|m| m.get_fraction = 1.5).is_err());
        assert!(mc(|m| m.get_fraction = f64::NAN).is_err());
        assert!(mc(|m| m.keys = 0).is_err());

        let bad_path = Workload::Http(HttpWorkload {
            paths: vec![WeightedPath {
                path: "/a b".into(),
                weight: 1.0,
            }],
            host: None,
        });
        assert!(bad_path.validate().is_err());
        let no_weight = Workload::Http(HttpWorkload {
            paths: vec![WeightedPath {
                path: "/".into(),
                weight: 0.0,
            }],
            host: None,
        });
        assert!(no_weight.validate().is_err());

        let pix = Workload::PixGrpc(PixWorkload {
            create_fraction: 0.5,
            ..PixWorkload::default()
        });
        let err = pix.validate().unwrap_err().to_string();
        assert!(err.contains("must be 1"), "{err}");
        let one_account = Workload::PixGrpc(PixWorkload {
            accounts: 1,
            ..PixWorkload::default()
        });
        assert!(one_account.validate().is_err());
    }
}
