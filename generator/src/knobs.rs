//! Generation knobs: the inputs the tuner adjusts (paper §4.5), grouped by what they jointly affect,
//! plus a few limits. Read from TOML (every field optional: a missing one takes its default), validated
//! with one-line errors naming the field, and written into every clone as a documented `knobs.toml`.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// All knobs. `Default` is the untuned generator.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Knobs {
    pub instructions: InstructionKnobs,
    pub instruction_working_set: InstructionWorkingSetKnobs,
    pub data_working_set: DataWorkingSetKnobs,
    pub branches: BranchKnobs,
    pub dependencies: DependencyKnobs,
    pub limits: LimitKnobs,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InstructionKnobs {
    pub per_request_scale: f64,
    /// Multiplies the background clusters' instructions per request on top of `per_request_scale`.
    /// Their work follows the server's uptime and activity, not the profiled window's requests
    /// (memcached's LRU maintainer: 699 instructions per request right after the warm-up, 8,222 after
    /// 150 s more), so it is the part of the count a window measures worst.
    pub background_scale: f64,
    pub skeleton_instructions: f64,
    pub default_per_request: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct InstructionWorkingSetKnobs {
    pub size_scale: f64,
    /// Multiplies the share of instruction fetches that miss a cache of `far_from_bytes`
    /// (`plan::scale_misses_past`): the first level's misses follow it in proportion, and the one-line
    /// loop takes (or gives) the difference, so the blocks below that size keep their shares.
    pub far_share_scale: f64,
    pub far_from_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DataWorkingSetKnobs {
    pub size_scale: f64,
    /// Stretches the data hit curve above `mid_from_bytes` only (`plan::stretch_above`): the
    /// accesses that miss the first cache level, and so what the second sees.
    pub mid_scale: f64,
    pub mid_from_bytes: u64,
    /// Stretches the data hit curve above `tail_from_bytes` only (`plan::stretch_above`): the
    /// accesses that miss a cache of that size, and so what the caches past it see.
    pub tail_scale: f64,
    pub tail_from_bytes: u64,
    /// Multiplies the share of accesses that miss a cache of `far_from_bytes`, after the stretches
    /// (`plan::scale_misses_from`): the first level's miss rate follows it in proportion, and the
    /// levels past it keep their misses per first-level miss.
    pub far_share_scale: f64,
    /// Where `far_share_scale` starts (power of two): the first data cache level's size. Apart
    /// from `mid_from_bytes`, which the tuner moves to twice that size where the mid leads the
    /// second level.
    pub far_from_bytes: u64,
    /// Multiplies the share of accesses that miss a cache of `tail_from_bytes`, after
    /// `far_share_scale` (`plan::scale_misses_from`): the second level's misses follow it in
    /// proportion, taken from (or given to) the reuses just below that size, while the first level's
    /// misses and the last level's misses per second-level miss stay.
    pub tail_share_scale: f64,
    /// Multiplies the share of the first-touch stream (`plan::add_cold_class`), the accesses that
    /// miss even at the footprint, after the shares above (`plan::scale_first_touch`): the last
    /// level's misses follow it. < 1 gives the difference to the reuses just past
    /// `tail_from_bytes`, which the last level holds, so the second level keeps its misses; > 1
    /// takes it from those reuses, nearest first, and what they do not hold from the smallest
    /// class, whose accesses hit everywhere.
    pub first_touch_scale: f64,
    /// Multiplies the share of the largest reuse class past `2 × tail_from_bytes`, after the
    /// first-touch stream's (`plan::scale_top_class`): the class whose reuses span the whole
    /// footprint, the last level's misses where a body has no first-touch stream. The difference
    /// goes to (or comes from) the reuses just past `tail_from_bytes`, as `first_touch_scale`'s does,
    /// which the second level misses as far as their region's layout makes them (memcached's is a
    /// 64 KiB region the L2 half holds: docs/generator.md).
    pub top_share_scale: f64,
    pub shared_fraction_scale: f64,
    pub regular_fraction_scale: f64,
    pub pointer_chase_scale: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BranchKnobs {
    pub taken_rate_scale: f64,
    pub transition_rate_scale: f64,
    /// How many pattern branches compare pseudo-random data instead of testing the chunk counter
    /// (see the entry's doc): 1 makes every branch whose rates are a coin toss's random, up to 2 the
    /// rest too.
    pub data_dependent_scale: f64,
    /// Multiplies every indirect jump's target-change rate (capped at the top bin; above 1,
    /// single-target jumps move to the top bin so the mean follows the scale): 0 gives every
    /// dispatch one target, so it is predicted whenever its predictor entry is its own.
    pub indirect_change_scale: f64,
    /// Share of counter pattern branches drawn on their own; the rest repeat the test of a recent
    /// branch of their chunk, which a history predictor learns (see the entry's doc).
    pub independent_share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DependencyKnobs {
    pub distance_scale: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitKnobs {
    pub max_buffer_bytes: u64,
    pub max_code_bytes: u64,
    pub max_rep_count: u64,
    pub chunk_instructions: u64,
}

impl Default for InstructionKnobs {
    fn default() -> Self {
        InstructionKnobs {
            per_request_scale: 1.0,
            background_scale: 1.0,
            skeleton_instructions: 0.0,
            default_per_request: 20_000.0,
        }
    }
}
impl Default for InstructionWorkingSetKnobs {
    fn default() -> Self {
        InstructionWorkingSetKnobs {
            size_scale: 1.0,
            far_share_scale: 1.0,
            far_from_bytes: 1 << 15,
        }
    }
}
impl Default for DataWorkingSetKnobs {
    fn default() -> Self {
        DataWorkingSetKnobs {
            size_scale: 1.0,
            mid_scale: 1.0,
            mid_from_bytes: 1 << 15,
            tail_scale: 1.0,
            tail_from_bytes: 1 << 20,
            far_share_scale: 1.0,
            far_from_bytes: 1 << 15,
            tail_share_scale: 1.0,
            first_touch_scale: 1.0,
            top_share_scale: 1.0,
            shared_fraction_scale: 1.0,
            regular_fraction_scale: 1.0,
            pointer_chase_scale: 1.0,
        }
    }
}
impl Default for BranchKnobs {
    fn default() -> Self {
        BranchKnobs {
            taken_rate_scale: 1.0,
            transition_rate_scale: 1.0,
            data_dependent_scale: 1.0,
            indirect_change_scale: 1.0,
            independent_share: 1.0,
        }
    }
}
impl Default for DependencyKnobs {
    fn default() -> Self {
        DependencyKnobs {
            distance_scale: 1.0,
        }
    }
}
impl Default for LimitKnobs {
    fn default() -> Self {
        LimitKnobs {
            max_buffer_bytes: 64 << 20,
            max_code_bytes: 4 << 20,
            max_rep_count: 4096,
            chunk_instructions: 48,
        }
    }
}

/// A knob's value, for validation and for rendering `knobs.toml`.
#[derive(Debug, Clone, Copy)]
enum Value {
    F(f64),
    U(u64),
}

/// One knob: where it lives, its value, its allowed range and what it does.
struct Entry {
    section: &'static str,
    key: &'static str,
    value: Value,
    min: f64,
    max: f64,
    /// Whether `min` itself is allowed (scales must be strictly positive).
    min_inclusive: bool,
    doc: &'static str,
}

/// Why a knobs file was refused; always names the field.
#[derive(Debug, thiserror::Error)]
pub enum KnobError {
    #[error("cannot read knobs file {path}: {cause}")]
    Read { path: String, cause: std::io::Error },
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("{origin}: field `{field}`: {message}")]
    Field {
        origin: String,
        field: String,
        message: String,
    },
}

impl Knobs {
    /// Reads and validates a knobs file.
    pub fn load(path: &Path) -> Result<Knobs, KnobError> {
        let text = std::fs::read_to_string(path).map_err(|cause| KnobError::Read {
            path: path.display().to_string(),
            cause,
        })?;
        Knobs::from_toml(&text, &path.display().to_string())
    }

    /// Parses and validates TOML; `origin` names the source in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Knobs, KnobError> {
        let knobs: Knobs = toml::from_str(text).map_err(|e| {
            // toml's own message spans several lines (with a source excerpt); keep one line.
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
            let message = e.message().trim().replace('\n', " ");
            KnobError::Parse {
                origin: origin.to_string(),
                message: match line {
                    Some(l) => format!("line {l}: {message}"),
                    None => message,
                },
            }
        })?;
        knobs
            .validate()
            .map_err(|(field, message)| KnobError::Field {
                origin: origin.to_string(),
                field,
                message,
            })?;
        Ok(knobs)
    }

    /// Checks every knob against its range. Returns the dotted field name and what is wrong.
    pub fn validate(&self) -> Result<(), (String, String)> {
        for e in self.entries() {
            let field = format!("{}.{}", e.section, e.key);
            let v = match e.value {
                Value::F(f) => f,
                Value::U(u) => u as f64,
            };
            let low_ok = if e.min_inclusive {
                v >= e.min
            } else {
                v > e.min
            };
            if !v.is_finite() || !low_ok || v > e.max {
                let lo = if e.min_inclusive { "≥" } else { ">" };
                return Err((
                    field,
                    format!(
                        "must be a finite number {lo} {} and ≤ {}, got {}",
                        e.min,
                        e.max,
                        render_value(e.value)
                    ),
                ));
            }
        }
        let l = &self.limits;
        for (key, v) in [
            ("limits.max_buffer_bytes", l.max_buffer_bytes),
            ("limits.max_code_bytes", l.max_code_bytes),
            (
                "instruction_working_set.far_from_bytes",
                self.instruction_working_set.far_from_bytes,
            ),
            (
                "data_working_set.mid_from_bytes",
                self.data_working_set.mid_from_bytes,
            ),
            (
                "data_working_set.tail_from_bytes",
                self.data_working_set.tail_from_bytes,
            ),
            (
                "data_working_set.far_from_bytes",
                self.data_working_set.far_from_bytes,
            ),
        ] {
            if !v.is_power_of_two() {
                return Err((key.to_string(), format!("must be a power of two, got {v}")));
            }
        }
        let dw = &self.data_working_set;
        if dw.mid_from_bytes >= dw.tail_from_bytes {
            return Err((
                "data_working_set.mid_from_bytes".to_string(),
                format!(
                    "must be below data_working_set.tail_from_bytes ({}), got {}",
                    dw.tail_from_bytes, dw.mid_from_bytes
                ),
            ));
        }
        Ok(())
    }

    /// The largest value a knob may take, by dotted field name (`branches.data_dependent_scale`);
    /// `None` for a field that is not a knob. The tuner clamps its steps to it.
    pub fn max_of(field: &str) -> Option<f64> {
        Knobs::default()
            .entries()
            .into_iter()
            .find(|e| format!("{}.{}", e.section, e.key) == field)
            .map(|e| e.max)
    }

    fn entries(&self) -> Vec<Entry> {
        let scale = |section, key, v: f64, doc| Entry {
            section,
            key,
            value: Value::F(v),
            min: 0.0,
            max: 100.0,
            min_inclusive: false,
            doc,
        };
        // Where a level's lever starts: a cache size in bytes, from `min` to 1 GiB.
        let cache_size = |section, key, v: u64, min: f64, doc| Entry {
            section,
            key,
            value: Value::U(v),
            min,
            max: (1u64 << 30) as f64,
            min_inclusive: true,
            doc,
        };
        vec![
            scale(
                "instructions",
                "per_request_scale",
                self.instructions.per_request_scale,
                "Multiplies the profiled dynamic user-space instructions per request of every cluster.",
            ),
            scale(
                "instructions",
                "background_scale",
                self.instructions.background_scale,
                "Multiplies the instructions per request of background clusters (timers, housekeeping) on \
                 top of per_request_scale: their work follows uptime and activity, not requests.",
            ),
            Entry {
                section: "instructions",
                key: "skeleton_instructions",
                value: Value::F(self.instructions.skeleton_instructions),
                min: 0.0,
                max: 1e9,
                min_inclusive: true,
                doc: "Instructions per request the runtime skeleton itself executes (measured once, \
                      subtracted so that the body adds only what is missing).",
            },
            Entry {
                section: "instructions",
                key: "default_per_request",
                value: Value::F(self.instructions.default_per_request),
                min: 0.0,
                max: 1e9,
                min_inclusive: false,
                doc: "Instructions per request of the default body used when the profile has no body \
                      section for a cluster.",
            },
            scale(
                "instruction_working_set",
                "size_scale",
                self.instruction_working_set.size_scale,
                "Stretches the instruction hit curve along the size axis (H'(s) = H(s / scale)): \
                 > 1 makes the code footprint larger (more i-cache misses).",
            ),
            scale(
                "instruction_working_set",
                "far_share_scale",
                self.instruction_working_set.far_share_scale,
                "Multiplies the share of instruction fetches that miss a cache of far_from_bytes \
                 (after size_scale): the first level's i-cache misses follow it in proportion. The \
                 one-line loop takes or gives the difference; the blocks below far_from_bytes keep \
                 their shares.",
            ),
            cache_size(
                "instruction_working_set",
                "far_from_bytes",
                self.instruction_working_set.far_from_bytes,
                128.0,
                "Where far_share_scale starts (power of two): the size of the first instruction \
                 cache level, 32 KiB on the bundled platform.",
            ),
            scale(
                "data_working_set",
                "size_scale",
                self.data_working_set.size_scale,
                "Stretches the data hit curve along the size axis (H'(s) = H(s / scale)): > 1 makes \
                 the data working set larger (more d-cache misses).",
            ),
            scale(
                "data_working_set",
                "mid_scale",
                self.data_working_set.mid_scale,
                "Stretches the data hit curve above mid_from_bytes only (after size_scale, before \
                 tail_scale): > 1 moves the accesses that miss the first cache level further out \
                 (more second-level misses), < 1 brings them in.",
            ),
            cache_size(
                "data_working_set",
                "mid_from_bytes",
                self.data_working_set.mid_from_bytes,
                1024.0,
                "Where mid_scale starts (power of two, below tail_from_bytes): the size of the \
                 first data cache level, 32 KiB on the bundled platform.",
            ),
            scale(
                "data_working_set",
                "tail_scale",
                self.data_working_set.tail_scale,
                "Stretches the data hit curve above tail_from_bytes only (after mid_scale): > 1 \
                 moves the accesses that miss a cache of that size further out (more last-level \
                 misses), < 1 brings them in.",
            ),
            cache_size(
                "data_working_set",
                "tail_from_bytes",
                self.data_working_set.tail_from_bytes,
                4096.0,
                "Where tail_scale starts (power of two): the size of the cache level before \
                 the last, 1 MiB on the bundled platform (validation/platforms/epyc-host.toml).",
            ),
            scale(
                "data_working_set",
                "far_share_scale",
                self.data_working_set.far_share_scale,
                "Multiplies the share of data accesses that miss a cache of far_from_bytes (after \
                 the stretches): the first level's misses follow it in proportion, the larger \
                 levels keep their misses per first-level miss. < 1 moves the difference to reuses \
                 within a line, > 1 takes it from the reuses just below far_from_bytes.",
            ),
            cache_size(
                "data_working_set",
                "far_from_bytes",
                self.data_working_set.far_from_bytes,
                1024.0,
                "Where far_share_scale starts (power of two): the size of the first data cache \
                 level, 32 KiB on the bundled platform.",
            ),
            scale(
                "data_working_set",
                "tail_share_scale",
                self.data_working_set.tail_share_scale,
                "Multiplies the share of data accesses that miss a cache of tail_from_bytes (after \
                 far_share_scale): the second level's misses follow it in proportion, the last level \
                 keeps its misses per second-level miss and the first level its misses. > 1 takes \
                 the difference from the reuses just below tail_from_bytes, < 1 gives it to them.",
            ),
            scale(
                "data_working_set",
                "first_touch_scale",
                self.data_working_set.first_touch_scale,
                "Multiplies the share of the first-touch stream (data accesses that miss even at \
                 the footprint), after the other shares: the last level's misses follow it. < 1 \
                 gives the difference to the reuses just past tail_from_bytes (second-level misses, \
                 last-level hits), > 1 takes it from those reuses and then from the smallest \
                 class. No effect on a body without such a stream.",
            ),
            scale(
                "data_working_set",
                "top_share_scale",
                self.data_working_set.top_share_scale,
                "Multiplies the share of the largest reuse class past twice tail_from_bytes (the \
                 reuses that span the footprint), after first_touch_scale: the last level's misses \
                 follow it. < 1 gives the difference to the reuses just past tail_from_bytes, > 1 \
                 takes it from them and then from the smallest class. No effect on a body whose \
                 reuses end within twice tail_from_bytes.",
            ),
            scale(
                "data_working_set",
                "shared_fraction_scale",
                self.data_working_set.shared_fraction_scale,
                "Multiplies the share of data accesses to the shared buffer (capped at 1).",
            ),
            scale(
                "data_working_set",
                "regular_fraction_scale",
                self.data_working_set.regular_fraction_scale,
                "Multiplies the share of strided (prefetchable) data accesses (capped at 1).",
            ),
            scale(
                "data_working_set",
                "pointer_chase_scale",
                self.data_working_set.pointer_chase_scale,
                "Multiplies the share of loads that chase pointers (capped at 1).",
            ),
            scale(
                "branches",
                "taken_rate_scale",
                self.branches.taken_rate_scale,
                "Multiplies every branch's minority-direction rate (shifts the taken-rate bins).",
            ),
            scale(
                "branches",
                "transition_rate_scale",
                self.branches.transition_rate_scale,
                "Multiplies every branch's transition rate (shifts the transition-rate bins).",
            ),
            Entry {
                section: "branches",
                key: "data_dependent_scale",
                value: Value::F(self.branches.data_dependent_scale),
                min: 0.0,
                max: 2.0,
                min_inclusive: true,
                doc: "Share of pattern branches that compare a pseudo-random word with a threshold (a \
                      branch on data the predictor cannot learn) instead of testing the chunk \
                      counter: up to 1, that share of the branches whose transition rate is a coin \
                      toss's for their taken rate; from 1 to 2, also that much of the others. 0: \
                      every branch follows the counter (periodic, learnable).",
            },
            Entry {
                section: "branches",
                key: "indirect_change_scale",
                value: Value::F(self.branches.indirect_change_scale),
                min: 0.0,
                max: 10.0,
                min_inclusive: true,
                doc: "Multiplies every indirect jump's target-change rate (capped at the top bin, \
                      0.95; above 1, single-target jumps move to the top bin so that the mean \
                      follows the scale): 0 gives every dispatch a single target (mispredicted only \
                      where another jump shares its predictor entry).",
            },
            Entry {
                section: "branches",
                key: "independent_share",
                value: Value::F(self.branches.independent_share),
                min: 0.0,
                max: 1.0,
                min_inclusive: true,
                doc: "Share of counter pattern branches drawn on their own; each of the rest repeats \
                      the test of one of the previous six counter pattern branches of its chunk (same \
                      outcome, as where a program tests one condition twice), which a predictor \
                      indexed by global history learns from the first. The taken and transition \
                      histograms stay the profile's. 1: every branch independent.",
            },
            scale(
                "dependencies",
                "distance_scale",
                self.dependencies.distance_scale,
                "Multiplies register dependency distances (RAW, WAR, WAW): > 1 means more \
                 instruction-level parallelism.",
            ),
            Entry {
                section: "limits",
                key: "max_buffer_bytes",
                value: Value::U(self.limits.max_buffer_bytes),
                min: 4096.0,
                max: (1u64 << 30) as f64,
                min_inclusive: true,
                doc: "Largest data working set region per buffer (power of two); larger profiled \
                      sizes are folded into the largest allowed one.",
            },
            Entry {
                section: "limits",
                key: "max_code_bytes",
                value: Value::U(self.limits.max_code_bytes),
                min: 4096.0,
                max: (64u64 << 20) as f64,
                min_inclusive: true,
                doc: "Largest instruction block (power of two); larger profiled instruction working \
                      sets are folded into the largest allowed one.",
            },
            Entry {
                section: "limits",
                key: "max_rep_count",
                value: Value::U(self.limits.max_rep_count),
                min: 1.0,
                max: 65536.0,
                min_inclusive: true,
                doc: "Upper bound on the count of a generated rep-string instruction.",
            },
            Entry {
                section: "limits",
                key: "chunk_instructions",
                value: Value::U(self.limits.chunk_instructions),
                min: 16.0,
                max: 1024.0,
                min_inclusive: true,
                doc: "Target instructions per chunk (the unit a large instruction block is entered \
                      and left at; each has a few loop-control instructions).",
            },
        ]
    }

    /// The documented `knobs.toml` written into a clone; parses back to the same knobs.
    pub fn to_documented_toml(&self, seed: u64) -> String {
        let mut out = String::new();
        out.push_str(
            "# Generation knobs of this clone (ditto generate --knobs FILE). Every knob is listed with\n\
             # the value used; the tuner adjusts the scales. Regenerate with:\n",
        );
        let _ = writeln!(
            out,
            "#   ditto generate profile.json -o DIR --knobs knobs.toml --seed {seed}"
        );
        let mut section = "";
        for e in self.entries() {
            if e.section != section {
                section = e.section;
                let _ = write!(out, "\n[{section}]\n");
            }
            for line in wrap(e.doc, 100) {
                let _ = writeln!(out, "# {line}");
            }
            let _ = writeln!(out, "{} = {}", e.key, render_value(e.value));
        }
        out
    }
}

fn render_value(v: Value) -> String {
    match v {
        // `{:?}` is the shortest representation that parses back to the same f64, always with a
        // decimal point or exponent, so TOML reads it as a float.
        Value::F(f) if f.is_finite() => format!("{f:?}"),
        Value::F(f) => format!("{f}"),
        Value::U(u) => u.to_string(),
    }
}

/// Greedy word wrap for comments.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        if !cur.is_empty() && cur.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_toml_round_trips() {
        let mut k = Knobs::default();
        k.branches.taken_rate_scale = 1.25;
        k.limits.max_rep_count = 100;
        let text = k.to_documented_toml(3);
        let back = Knobs::from_toml(&text, "knobs.toml").expect("parses");
        assert_eq!(back, k);
    }

    #[test]
    fn partial_file_takes_defaults() {
        let k = Knobs::from_toml("[branches]\ntaken_rate_scale = 2.0\n", "k").expect("ok");
        assert_eq!(k.branches.taken_rate_scale, 2.0);
        assert_eq!(k.instructions, InstructionKnobs::default());
    }
}
