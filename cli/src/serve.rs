//! `ditto serve`: start a target, warm it, keep it running until Ctrl-C.

use std::time::Duration;

use anyhow::Result;
use ditto_target::LaunchOptions;

use crate::args::ServeArgs;
use crate::load::load_spec;
use crate::ui::outln;

pub fn run(args: ServeArgs) -> Result<()> {
    let mut spec = load_spec(&args.target)?;
    if args.no_warm {
        spec.warm.enabled = false;
    }
    let launch = LaunchOptions {
        port: args.port,
        ..LaunchOptions::default()
    };
    let (mut target, warm) =
        ditto_measure::start_warm(&spec, &launch, &mut |m| eprintln!("ditto: {m}"))?;
    if let Some(w) = warm {
        eprintln!("ditto: warmed with {} requests ({} ok)", w.requests, w.ok);
    }
    // Scripts read this line: the PID to attach to and the address to load.
    outln!(
        "pid={} addr={} run_dir={}",
        target.pid(),
        target.addr(),
        target.run_dir().display()
    );
    eprintln!("ditto: {} is serving; press Ctrl-C to stop it", spec.name);
    loop {
        if let Some(status) = target.try_exit_status() {
            anyhow::bail!(
                "{} exited on its own ({status}); its last output:\n{}",
                spec.name,
                target.log_tail()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
