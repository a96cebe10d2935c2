//! Progress shown while a long command runs: a bar redrawn in place on a terminal, one line per
//! step otherwise (a pipe, a log file, CI), so scripts never see control characters.
//!
//! The bar (drawn by `indicatif`) lives on standard error, so standard output keeps only
//! results (tables, JSON). While it is shown, it is redrawn every 200 ms with the elapsed time,
//! and [`Progress::line`] prints a finished line above it.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

const WIDTH: usize = 24;
const TICK: Duration = Duration::from_millis(200);
/// Longest step text shown in the bar, in characters.
const STEP_CHARS: usize = 50;

/// A progress display of `total` steps.
pub struct Progress {
    started: Instant,
    bar: ProgressBar,
    /// Whether the bar is drawn (standard error is a terminal).
    shown: bool,
    lines_to_stderr: bool,
    quiet: bool,
}

/// The step text as the bar shows it: at most [`STEP_CHARS`] characters.
fn shorten(text: &str) -> String {
    if text.chars().count() > STEP_CHARS {
        text.chars().take(STEP_CHARS - 1).collect::<String>() + "…"
    } else {
        text.to_string()
    }
}

impl Progress {
    /// A display of `total` steps. The bar is drawn only when standard error is a terminal;
    /// otherwise each step is a line on standard output, or on standard error when
    /// `lines_to_stderr` (a command whose standard output is JSON).
    pub fn new(total: usize, lines_to_stderr: bool) -> Progress {
        let shown = std::io::stderr().is_terminal();
        let started = Instant::now();
        let bar = if shown {
            let bar = ProgressBar::with_draw_target(
                Some(total.max(1) as u64),
                ProgressDrawTarget::stderr(),
            );
            let template = format!("[{{bar:{WIDTH}}}] {{pos}}/{{len}} {{secs}} {{wide_msg}}");
            let style = ProgressStyle::with_template(&template)
                .expect("the bar's template is valid")
                .progress_chars("#-")
                .with_key(
                    "secs",
                    move |_: &ProgressState, w: &mut dyn std::fmt::Write| {
                        let _ = write!(w, "{:5.1}s", started.elapsed().as_secs_f64());
                    },
                );
            bar.set_style(style);
            bar.enable_steady_tick(TICK);
            bar
        } else {
            ProgressBar::hidden()
        };
        Progress {
            started,
            bar,
            shown,
            lines_to_stderr,
            quiet: false,
        }
    }

    /// A display that shows only the bar: without a terminal, steps print nothing.
    pub fn bar_only(total: usize) -> Progress {
        let mut p = Progress::new(total, true);
        p.quiet = true;
        p
    }

    /// Starts the next step: counts the previous one as done and shows `text`.
    pub fn step(&self, text: &str) {
        if !self.bar.message().is_empty() {
            self.bar.inc(1);
        }
        let next = self.bar.position() + 1;
        if self.bar.length().is_some_and(|len| len < next) {
            self.bar.set_length(next);
        }
        self.bar.set_message(shorten(text));
        self.line(text);
    }

    /// Prints one line (with the elapsed time) above the bar, or as a plain line.
    pub fn line(&self, text: &str) {
        if self.quiet {
            return;
        }
        let line = format!("[{:5.1}s] {text}", self.started.elapsed().as_secs_f64());
        if self.shown {
            self.bar.println(line);
        } else if self.lines_to_stderr {
            eprintln!("{line}");
        } else {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }

    /// Prints a result line on standard output, as is, keeping the bar below it.
    pub fn out(&self, text: &str) {
        self.bar.suspend(|| {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        });
    }

    /// Prints a line that came from elsewhere (a rank's error output) above the bar, as is.
    pub fn raw(&self, text: &str) {
        if self.shown {
            self.bar.println(text);
        } else {
            eprintln!("{text}");
        }
    }

    /// Ends the display: the bar is cleared; later lines are plain lines.
    pub fn finish(&mut self) {
        if self.shown {
            self.bar.finish_and_clear();
            self.shown = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
