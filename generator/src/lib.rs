//! Clone generator: profile + knobs + seed → a self-contained clone repository (runtime skeleton
//! configured from the thread, network and syscall sections; a synthetic assembly body from the body
//! section). Deterministic: the same inputs give byte-identical files. See docs/generator.md.

pub mod branch_orient;
pub mod confidentiality;
pub mod connections;
pub mod counter_field;
pub mod deficit;
pub mod encoding;
pub mod isa;
pub mod knobs;
pub mod output;
pub mod plan;
pub mod render;
pub mod residual;
pub mod rng;
pub mod skeleton;
pub mod synth;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use ditto_profile::ClusterBody;
use ditto_profile::Profile;

pub use confidentiality::{check_clone, Report};
pub use knobs::Knobs;

mod runtime_files {
    include!(concat!(env!("OUT_DIR"), "/runtime_files.rs"));
}
/// The runtime sources every clone carries: (path inside the clone, contents).
pub use runtime_files::RUNTIME_FILES;

/// What `generate` needs.
#[derive(Debug, Clone)]
pub struct Options {
    pub profile: PathBuf,
    pub out: PathBuf,
    pub seed: u64,
    pub knobs: Knobs,
    /// The runtime skeleton's own body (request workers of a clone generated with `--empty-body`,
    /// profiled): its distributions are subtracted from the original's (see `residual`). The clone
    /// keeps it as `skeleton.json`, so that regenerating (tuning) subtracts it again.
    pub skeleton: Option<ClusterBody>,
    /// The bare skeleton: no cluster calls a body, so that a profile of the clone is the runtime's
    /// own cost (`--empty-body`, `scripts/profile-skeletons.sh`).
    pub empty_body: bool,
}

/// Where a clone keeps the skeleton body it was generated with.
pub const SKELETON_FILE: &str = "skeleton.json";

/// A rendered clone, before it is written.
#[derive(Debug, Clone)]
pub struct CloneFiles {
    pub name: String,
    /// Relative path → contents, in path order.
    pub files: BTreeMap<String, Vec<u8>>,
    pub warnings: Vec<String>,
    pub skeleton: skeleton::Skeleton,
    /// Generated bodies, per runtime cluster that has one.
    pub bodies: Vec<synth::ClusterAsm>,
}

/// The clone's name from the output directory: letters, digits, `_` and `-` only, what a target spec
/// accepts as its `name` (the clone's `target.toml` carries it; a `.` there made `ditto load
/// --target clone/target.toml` refuse a clone generated into `out/po-1.0`).
pub fn clone_name(out: &Path) -> String {
    let raw = out.file_name().and_then(|n| n.to_str()).unwrap_or("clone");
    let s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if s.is_empty() {
        "clone".to_string()
    } else {
        s
    }
}

const PENDING_CONFIDENTIALITY: &str = "Not checked yet. `ditto generate PROFILE -o DIR --original /path/to/original` builds the clone \
and checks that its binary contains no 16-byte run of the original's code, none of its strings and none \
of its symbol names, and records the result here.";

/// Renders every file of a clone (pure: nothing is written).
pub fn render_clone(
    profile: &Profile,
    profile_bytes: &[u8],
    name: &str,
    seed: u64,
    knobs: &Knobs,
    skeleton: Option<&ClusterBody>,
    empty_body: bool,
) -> Result<CloneFiles> {
    knobs
        .validate()
        .map_err(|(f, m)| anyhow::anyhow!("knobs: field `{f}`: {m}"))?;
    let mut skel = skeleton::skeleton(profile);
    if empty_body {
        // Not a minimal body: even the smallest one runs its prologue, ring entries and epilogue
        // (144 instructions a call in memcached's request workers), and the skeleton's profile
        // counted them, so every clone's body was generated that much short (round trip: 3,051
        // instructions a request against 3,209).
        for cl in &mut skel.clusters {
            cl.has_body = false;
        }
    }
    let mut warnings = skel.warnings.clone();
    if profile.body.is_none() {
        warnings.push(
            "the profile has no body section (it was taken in attach mode): request workers get the \
             default body (instructions.default_per_request instructions, a typical mix and working set); \
             profile with --launch for a faithful body"
                .to_string(),
        );
    }
    let mut plans: Vec<Option<plan::BodyPlan>> = Vec::new();
    for cl in &mut skel.clusters {
        if !cl.has_body {
            plans.push(None);
            continue;
        }
        let found = profile.body.as_ref().and_then(|b| {
            b.clusters.iter().find(|c| c.cluster == cl.id).or_else(|| {
                // A plain program's profile has no skeleton clusters and one body (`all`): it is the
                // body of the worker the clone adds.
                (profile.threads.clusters.is_empty() && b.clusters.len() == 1)
                    .then(|| &b.clusters[0])
                    .filter(|_| cl.role == "DITTO_ROLE_WORKER")
            })
        });
        if found.is_none() && cl.role != "DITTO_ROLE_WORKER" {
            // No body profiled for an acceptor or background cluster: it does only its system calls.
            cl.has_body = false;
            plans.push(None);
            continue;
        }
        if found.is_none() && profile.body.is_some() {
            warnings.push(format!(
                "cluster {}: no body in the profile's body section; default body used",
                cl.id
            ));
        }
        // Request workers run the skeleton beside the body: the body's target is what the original
        // does beyond the skeleton, in every distribution.
        let residual = match (found, skeleton) {
            (Some(b), Some(s)) if cl.role == "DITTO_ROLE_WORKER" => {
                let (r, w) = residual::subtract(b, s, knobs.instructions.per_request_scale);
                warnings.extend(w);
                Some(r)
            }
            _ => None,
        };
        let p = plan::plan(
            &plan::PlanInput {
                body: residual.as_ref().or(found),
                calls_per_request: cl.calls_per_request,
                cluster: &cl.id,
                // The skeleton's own cost is per request, in the threads that serve requests.
                skeleton_instructions: if cl.role == "DITTO_ROLE_WORKER" {
                    knobs.instructions.skeleton_instructions
                } else {
                    0.0
                },
                background: cl.role == "DITTO_ROLE_BACKGROUND",
            },
            knobs,
        );
        warnings.extend(p.warnings.iter().cloned());
        plans.push(Some(p));
    }
    // All of a process's code shares its instruction cache (each cluster's curve is its own fetches
    // in that shared cache, and cachegrind simulates one cache for all threads): the blocks are
    // sized together.
    let skeleton_code = skeleton
        .map(|s| {
            plan::curve_streams(
                &s.instruction_working_set,
                knobs.instructions.skeleton_instructions,
            )
        })
        .unwrap_or_default();
    {
        let mut users: Vec<(&mut plan::BodyPlan, f64)> = skel
            .clusters
            .iter()
            .zip(plans.iter_mut())
            .filter_map(|(cl, p)| p.as_mut().map(|p| (p, cl.calls_per_request)))
            .collect();
        plan::fit_blocks(&mut users, &skeleton_code);
    }
    // The data side too: all bodies' regions, each worker thread's private copy and the skeleton's
    // accesses share one data cache.
    let skeleton_data = skeleton
        .map(|s| {
            plan::curve_streams(
                &s.data_working_set,
                knobs.instructions.skeleton_instructions * residual::accesses_per_instruction(s),
            )
        })
        .unwrap_or_default();
    {
        let mut users: Vec<(&mut plan::BodyPlan, f64, u32)> = skel
            .clusters
            .iter()
            .zip(plans.iter_mut())
            .filter_map(|(cl, p)| p.as_mut().map(|p| (p, cl.calls_per_request, cl.threads)))
            .collect();
        plan::fit_data(&mut users, &skeleton_data, knobs.limits.max_buffer_bytes);
    }
    let mut bodies: Vec<Option<synth::ClusterAsm>> = Vec::new();
    for (cl, p) in skel.clusters.iter().zip(&plans) {
        let Some(p) = p else {
            bodies.push(None);
            continue;
        };
        let mut asm = synth::synthesize(&cl.cname, p, knobs, seed)
            .with_context(|| format!("synthesising the body of cluster {}", cl.id))?;
        // The file's one trampoline table ranks every body's indirect jumps per request.
        for t in &mut asm.trampolines {
            t.1 *= cl.calls_per_request;
        }
        bodies.push(Some(asm));
    }
    let priv_bytes = bodies
        .iter()
        .flatten()
        .map(|b| b.priv_bytes)
        .max()
        .unwrap_or(4096);
    let shared_bytes = bodies
        .iter()
        .flatten()
        .map(|b| b.shared_bytes)
        .max()
        .unwrap_or(0)
        .max(64);
    let body_refs: Vec<Option<&synth::ClusterAsm>> = bodies.iter().map(|b| b.as_ref()).collect();
    let config = render::config_c(&render::ConfigInput {
        name,
        skeleton: &skel,
        bodies: &body_refs,
        priv_bytes,
        shared_bytes,
        seed,
    });
    let present: Vec<&synth::ClusterAsm> = bodies.iter().flatten().collect();
    let body = render::body_s(name, &present);
    let target = render::target_toml(name, &skel, profile);

    let mut body_md = String::new();
    for (cl, b) in skel.clusters.iter().zip(&bodies) {
        if let Some(b) = b {
            body_md.push_str(&render::body_md(
                &cl.cname,
                &b.stats,
                priv_bytes,
                shared_bytes,
            ));
        }
    }
    if body_md.is_empty() {
        body_md.push_str("No cluster has a body.\n");
    }
    let mut warn_md = String::from("## Warnings\n\n");
    if warnings.is_empty() {
        warn_md.push_str("None.\n");
    } else {
        for w in &warnings {
            warn_md.push_str(&format!("- {w}\n"));
        }
    }
    let seed_s = seed.to_string();
    let port_s = skel.port.to_string();
    let identity = render::identity(profile, seed);
    let skeleton_md = render::skeleton_md(&skel);
    let load_md = render::load_md(target.is_some(), &skel);
    let readme = render::fill(
        render::TEMPLATE_README,
        &[
            ("name", name),
            ("identity", identity.trim_end()),
            ("port", &port_s),
            ("load", &load_md),
            ("seed", &seed_s),
            ("skeleton", skeleton_md.trim_end()),
            ("body", body_md.trim_end()),
            ("confidentiality", PENDING_CONFIDENTIALITY),
            ("warnings", warn_md.trim_end()),
        ],
    )?;

    let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut put = |k: &str, v: Vec<u8>| {
        files.insert(k.to_string(), v);
    };
    put(
        output::MARKER,
        b"This directory is a clone generated by `ditto generate`; regenerating replaces it.\n"
            .to_vec(),
    );
    put(".gitignore", render::TEMPLATE_GITIGNORE.as_bytes().to_vec());
    put(
        "Makefile",
        render::fill(render::TEMPLATE_MAKEFILE, &[("name", name)])?.into_bytes(),
    );
    put("README.md", readme.into_bytes());
    put("profile.json", profile_bytes.to_vec());
    put("knobs.toml", knobs.to_documented_toml(seed).into_bytes());
    if let Some(s) = skeleton {
        let mut text = serde_json::to_vec_pretty(s).context("serialising the skeleton body")?;
        text.push(b'\n');
        put(SKELETON_FILE, text);
    }
    put(
        "src/main.c",
        render::fill(render::TEMPLATE_MAIN, &[("name", name)])?.into_bytes(),
    );
    put("src/config.c", config.into_bytes());
    put("src/body.S", body.into_bytes());
    if let Some(t) = target {
        put("target.toml", t.into_bytes());
    }
    for (path, text) in RUNTIME_FILES {
        put(path, text.as_bytes().to_vec());
    }
    Ok(CloneFiles {
        name: name.to_string(),
        files,
        warnings,
        skeleton: skel,
        bodies: bodies.into_iter().flatten().collect(),
    })
}

/// Whether the clone of `profile` runs a body in a background cluster (a timer or housekeeping
/// thread with a profiled body), what `instructions.background_scale` acts on. The same rule as
/// `render_clone`: an acceptor or background cluster without a profiled body makes only its calls.
pub fn has_background_body(profile: &Profile) -> bool {
    let Some(body) = profile.body.as_ref() else {
        return false;
    };
    skeleton::skeleton(profile).clusters.iter().any(|c| {
        c.role == "DITTO_ROLE_BACKGROUND"
            && c.has_body
            && body.clusters.iter().any(|b| b.cluster == c.id)
    })
}

/// Whether a body of `profile` has a first-touch stream under `knobs` (`plan::add_cold_class`), what
/// `data_working_set.first_touch_scale` acts on: a data curve that ends below 1 within half the
/// buffer.
pub fn has_first_touch_stream(profile: &Profile, knobs: &Knobs) -> bool {
    any_data_class(profile, knobs, |c| c.first_touch)
}

/// Whether a body of `profile` has reuses past twice `data_working_set.tail_from_bytes` under
/// `knobs`, what `data_working_set.top_share_scale` acts on (`plan::scale_top_class`).
pub fn has_top_reuse_class(profile: &Profile, knobs: &Knobs) -> bool {
    let tail_from = knobs.data_working_set.tail_from_bytes;
    any_data_class(profile, knobs, |c| {
        plan::reuses_past_twice_the_tail(c, tail_from)
    })
}

/// Whether a body's planned data classes (one call, no skeleton) hold a class with a share that
/// `which` selects.
fn any_data_class(
    profile: &Profile,
    knobs: &Knobs,
    which: impl Fn(&plan::DataClass) -> bool,
) -> bool {
    let Some(body) = profile.body.as_ref() else {
        return false;
    };
    body.clusters.iter().any(|b| {
        let p = plan::plan(
            &plan::PlanInput {
                body: Some(b),
                calls_per_request: 1.0,
                cluster: &b.cluster,
                skeleton_instructions: 0.0,
                background: false,
            },
            knobs,
        );
        p.data_classes.iter().any(|c| c.share > 0.0 && which(c))
    })
}

/// Loads the profile, renders the clone and writes it to `opts.out` (atomically).
pub fn generate(opts: &Options) -> Result<CloneFiles> {
    let profile = Profile::load(&opts.profile)?;
    let bytes = std::fs::read(&opts.profile)
        .with_context(|| format!("cannot read {}", opts.profile.display()))?;
    // Refuse early, before any work, if the target is not ours to replace.
    output::check_target(&opts.out)?;
    let name = clone_name(&opts.out);
    let clone = render_clone(
        &profile,
        &bytes,
        &name,
        opts.seed,
        &opts.knobs,
        opts.skeleton.as_ref(),
        opts.empty_body,
    )?;
    output::write_clone(&opts.out, &clone.files)?;
    Ok(clone)
}

/// Replaces the README's confidentiality section of a written clone with `text` (markdown).
pub fn record_confidentiality(dir: &Path, text: &str) -> Result<()> {
    let path = dir.join("README.md");
    let readme = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let head = "## Confidentiality\n\n";
    let start = readme
        .find(head)
        .context("README.md has no confidentiality section")?
        + head.len();
    let end = readme[start..]
        .find("\n## ")
        .map(|e| start + e)
        .unwrap_or(readme.len());
    let updated = format!(
        "{}{}\n{}",
        &readme[..start],
        text.trim_end(),
        &readme[end..]
    );
    output::replace_file(&path, updated.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clone_name_is_one_a_target_spec_accepts() {
        assert_eq!(clone_name(Path::new("out/po-1.0")), "po-1_0");
        assert_eq!(
            clone_name(Path::new("clones/pix-optimized")),
            "pix-optimized"
        );
        assert_eq!(clone_name(Path::new("/tmp/.hidden clone")), "_hidden_clone");
        assert_eq!(clone_name(Path::new("/")), "clone");
    }
}
