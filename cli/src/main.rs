//! `ditto`: the command line. Thin by design: flags are parsed here (`args`), the work is done by the
//! library crates, and each subcommand module only wires the two together and prints.

mod args;
mod compare;
mod diff;
mod generate;
mod load;
mod profile;
mod serve;
mod tune;
mod ui;
mod validate;

use std::sync::atomic::{AtomicBool, Ordering};

use clap::Parser;

use crate::args::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    install_signal_handler();
    let result = match cli.command {
        Command::Load(a) => load::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Profile(a) => profile::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Generate(a) => generate::run(a),
        Command::Validate(a) => validate::run(a),
        Command::Tune(a) => tune::run(a),
    };
    if let Err(e) = result {
        if INTERRUPTED.load(Ordering::SeqCst) {
            // The signal handler is stopping targets and will exit with the signal's code; the error
            // seen here (a target that vanished) is its doing.
            loop {
                std::thread::park();
            }
        }
        // One line (plus context lines from the error chain) and a non-zero exit; never a panic.
        eprintln!("ditto: error: {e:#}");
        ditto_target::kill_all_running();
        std::process::exit(1);
    }
}

/// Set once a SIGINT or SIGTERM arrived.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// On Ctrl-C or SIGTERM, stop every target ditto started before exiting, so nothing is left behind.
fn install_signal_handler() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(sig) = signals.forever().next() {
            INTERRUPTED.store(true, Ordering::SeqCst);
            eprintln!("\nditto: interrupted; stopping the targets it started");
            ditto_target::kill_all_running();
            std::process::exit(128 + sig);
        }
    });
}
