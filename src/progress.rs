//! Progress shown while a long command runs: a bar redrawn in place on a terminal, one line per
//! step otherwise (a pipe, a log file, CI), so scripts never see control characters.
//!
//! The bar lives on standard error, so standard output keeps only results (tables, JSON).
//! While it is shown, a ticker thread redraws it every 200 ms with the elapsed time, and
//! [`Progress::line`] prints a finished line above it.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const WIDTH: usize = 24;
const TICK: Duration = Duration::from_millis(200);

struct State {
    done: usize,
    total: usize,
    step: String,
    running: bool,
}

/// A progress display of `total` steps.
pub struct Progress {
    started: Instant,
    state: Arc<Mutex<State>>,
    bar: bool,
    lines_to_stderr: bool,
    quiet: bool,
    ticker: Option<JoinHandle<()>>,
}

fn draw(started: Instant, s: &State) {
    let filled = (s.done.min(s.total) * WIDTH)
        .checked_div(s.total)
        .unwrap_or(0);
    let mut step = s.step.clone();
    if step.chars().count() > 50 {
        step = step.chars().take(49).collect::<String>() + "…";
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "\r\x1b[2K[{}{}] {}/{} {:5.1}s {}",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled),
        s.done,
        s.total,
        started.elapsed().as_secs_f64(),
        step
    );
    let _ = err.flush();
}

impl Progress {
    /// A display of `total` steps. The bar is drawn only when standard error is a terminal;
    /// otherwise each step is a line on standard output, or on standard error when
    /// `lines_to_stderr` (a command whose standard output is JSON).
    pub fn new(total: usize, lines_to_stderr: bool) -> Progress {
        let bar = std::io::stderr().is_terminal();
        let started = Instant::now();
        let state = Arc::new(Mutex::new(State {
            done: 0,
            total: total.max(1),
            step: String::new(),
            running: true,
        }));
        let ticker = bar.then(|| {
            let state = Arc::clone(&state);
            std::thread::spawn(move || {
                loop {
                    std::thread::sleep(TICK);
                    let s = state.lock().unwrap_or_else(PoisonError::into_inner);
                    if !s.running {
                        break;
                    }
                    draw(started, &s);
                }
            })
        });
        Progress {
            started,
            state,
            bar,
            lines_to_stderr,
            quiet: false,
            ticker,
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
        {
            let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if !s.step.is_empty() {
                s.done += 1;
            }
            s.total = s.total.max(s.done + 1);
            s.step = text.to_string();
        }
        self.line(text);
    }

    /// Prints one line (with the elapsed time) above the bar, or as a plain line.
    pub fn line(&self, text: &str) {
        if self.quiet {
            if self.bar {
                let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                draw(self.started, &s);
            }
            return;
        }
        let line = format!("[{:5.1}s] {text}", self.started.elapsed().as_secs_f64());
        if self.bar {
            let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "\r\x1b[2K{line}");
            }
            draw(self.started, &s);
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
        if self.bar {
            let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            {
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "\r\x1b[2K");
                let _ = err.flush();
            }
            {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "{text}");
                let _ = out.flush();
            }
            draw(self.started, &s);
        } else {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}");
            let _ = out.flush();
        }
    }

    /// Prints a line that came from elsewhere (a rank's error output) above the bar, as is.
    pub fn raw(&self, text: &str) {
        if self.bar {
            let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            {
                let mut err = std::io::stderr().lock();
                let _ = writeln!(err, "\r\x1b[2K{text}");
            }
            draw(self.started, &s);
        } else {
            eprintln!("{text}");
        }
    }

    /// Ends the display: the bar is cleared; later lines are plain lines.
    pub fn finish(&mut self) {
        {
            let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            s.running = false;
            s.done = s.total;
        }
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        if self.bar {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.bar = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
