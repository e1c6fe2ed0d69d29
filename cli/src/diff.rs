//! `ditto diff`: a clone's body against its original's, field by field.

use anyhow::{bail, Context, Result};
use ditto_profile::diff::{body_diff, syscall_diff, worst, ErrorKind};
use ditto_profile::{ClusterBody, Profile};

use crate::args::DiffArgs;
use crate::ui::outln;

fn cluster<'a>(p: &'a Profile, id: Option<&str>, what: &str) -> Result<&'a ClusterBody> {
    let Some(body) = &p.body else {
        bail!("the {what} profile has no body section; take it with `ditto profile --launch`");
    };
    match id {
        Some(id) => body
            .clusters
            .iter()
            .find(|c| c.cluster == id)
            .with_context(|| format!("the {what} profile's body has no cluster {id}")),
        None => body
            .clusters
            .iter()
            .max_by(|a, b| {
                a.instructions_per_request
                    .total_cmp(&b.instructions_per_request)
            })
            .with_context(|| format!("the {what} profile's body has no cluster")),
    }
}

pub fn run(args: DiffArgs) -> Result<()> {
    let original = Profile::load(&args.original)?;
    let clone = Profile::load(&args.clone)?;
    let a = cluster(&original, args.cluster.as_deref(), "original")?;
    let b = cluster(&clone, Some(&a.cluster), "clone")?;
    let mut diffs = body_diff(a, b);
    // The skeleton's side: syscalls per request by name (empty when either profile has none).
    if !original.syscalls.clusters.is_empty() && !clone.syscalls.clusters.is_empty() {
        diffs.extend(syscall_diff(&original.syscalls, &clone.syscalls));
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&diffs)?);
        return Ok(());
    }
    outln!("cluster {}: {} fields", a.cluster, diffs.len());
    outln!(
        "{:<34} {:>12} {:>12} {:>10} {:>8}",
        "field",
        "original",
        "clone",
        "error",
        "limit"
    );
    for d in &diffs {
        let (err, lim) = match d.kind {
            ErrorKind::Relative => (
                format!("{:.1}%", 100.0 * d.error),
                format!("{:.0}%", 100.0 * d.tolerance),
            ),
            ErrorKind::Points => (
                format!("{:.2} pt", d.error),
                format!("{:.0} pt", d.tolerance),
            ),
        };
        outln!(
            "{:<34} {:>12.4} {:>12.4} {:>10} {:>8}{}",
            d.field,
            d.original,
            d.clone,
            err,
            lim,
            if d.within() { "" } else { "  OUT" }
        );
    }
    let outside = diffs.iter().filter(|d| !d.within()).count();
    if let Some(w) = worst(&diffs) {
        outln!(
            "worst: {} ({:.2}x its limit); {outside} of {} fields outside their limit",
            w.field,
            w.severity(),
            diffs.len()
        );
    }
    Ok(())
}
