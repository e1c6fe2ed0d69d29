//! Progress and status output on stderr; results go to stdout.

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
