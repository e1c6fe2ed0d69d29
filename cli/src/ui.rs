//! Progress and status output on stderr; results go to stdout (through [`outln!`]).

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use ditto_load::Progress;

/// Prints progress at most once a second: redrawn in place on a terminal, one line at a time otherwise.
pub struct ProgressLine {
    last: Option<Instant>,
    tty: bool,
}

impl ProgressLine {
    pub fn new() -> ProgressLine {
        ProgressLine {
            last: None,
            tty: std::io::stderr().is_terminal(),
        }
    }

    pub fn update(&mut self, p: &Progress) {
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        self.last = Some(Instant::now());
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K  {p}");
        } else {
            let _ = writeln!(err, "  {p}");
        }
    }

    pub fn status(&mut self, message: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K");
        }
        let _ = writeln!(err, "ditto: {message}");
    }

    pub fn finish(&mut self) {
        if self.tty && self.last.is_some() {
            let _ = writeln!(std::io::stderr().lock());
        }
        self.last = None;
    }
}

/// Writes one line of results to stdout. A reader that went away (`ditto diff … | head`) ends the
/// command quietly with success, as a filter's consumer expects; `println!` would panic there.
pub fn write_stdout_line(args: std::fmt::Arguments) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{args}").and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            ditto_target::kill_all_running();
            std::process::exit(0);
        }
        eprintln!("ditto: error: writing the results to stdout: {e}");
        ditto_target::kill_all_running();
        std::process::exit(1);
    }
}

/// `println!` for results: see [`write_stdout_line`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::ui::write_stdout_line(format_args!($($arg)*))
    };
}
pub(crate) use outln;
