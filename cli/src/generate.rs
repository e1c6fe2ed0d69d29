//! `ditto generate`: profile → clone repo, optionally built and checked against the original binary.

use std::process::Command;

use anyhow::{bail, Context, Result};
use ditto_generator::{Knobs, Options};

use crate::args::GenerateArgs;
use crate::ui::outln;

pub fn run(args: GenerateArgs) -> Result<()> {
    let mut knobs = match &args.knobs {
        Some(path) => Knobs::load(path)?,
        None => Knobs::default(),
    };
    let mut skeleton = None;
    if let Some(path) = &args.skeleton {
        let profile = ditto_profile::Profile::load(path)?;
        let Some(body) = &profile.body else {
            bail!(
                "{}: the skeleton profile has no body section; take it with `ditto profile --launch`",
                path.display()
            );
        };
        // The skeleton's busiest cluster is the one serving requests.
        let Some(workers) = body.clusters.iter().max_by(|a, b| {
            a.instructions_per_request
                .total_cmp(&b.instructions_per_request)
        }) else {
            bail!(
                "{}: the skeleton profile's body has no clusters; re-profile the skeleton",
                path.display()
            );
        };
        let cost = workers.instructions_per_request;
        eprintln!(
            "ditto: subtracting the skeleton's {cost:.0} instructions per request and its distributions"
        );
        knobs.instructions.skeleton_instructions = cost;
        skeleton = Some(workers.clone());
    }
    let clone = ditto_generator::generate(&Options {
        profile: args.profile.clone(),
        out: args.output.clone(),
        seed: args.seed,
        knobs,
        skeleton,
        empty_body: args.empty_body,
    })?;
    for w in &clone.warnings {
        eprintln!("ditto: warning: {w}");
    }
    for b in &clone.bodies {
        eprintln!(
            "ditto: body {}: {:.0} instructions per call (target {:.0}), {} static instructions",
            b.body_symbol,
            b.stats.dynamic_instructions,
            b.stats.target_instructions,
            b.stats.static_instructions
        );
    }
    outln!(
        "generated clone {} in {} ({} files); build it with `make -C {}`",
        clone.name,
        args.output.display(),
        clone.files.len(),
        args.output.display()
    );
    if let Some(original) = &args.original {
        eprintln!(
            "ditto: building the clone (make) to check it against {}",
            original.display()
        );
        let out = Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(&args.output)
            .output()
            .context("cannot run make")?;
        if !out.status.success() {
            bail!(
                "make failed in {}:\n{}",
                args.output.display(),
                String::from_utf8_lossy(&out.stderr).trim_end()
            );
        }
        let report = ditto_generator::check_clone(&args.output.join("clone"), original)?;
        print!("{report}");
        ditto_generator::record_confidentiality(&args.output, &report.to_markdown())?;
        if !report.passed() {
            bail!(
                "the clone contains material of {} (see above and the clone's README)",
                original.display()
            );
        }
    }
    Ok(())
}
