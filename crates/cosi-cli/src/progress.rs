//! A step-by-step progress display on stdout: one line per step with its
//! status and elapsed time. On a terminal the running step is a live line
//! (spinner, elapsed time, what it is waiting for) redrawn in place; when
//! stdout is not a terminal every line is plain and final, and what a step
//! waits for is printed once each time it changes.
//!
//! Log records written through [`LogWriter`] first erase the live line, so
//! component logs and the display never garble each other.

use std::fmt::Write as _;
use std::io::{IsTerminal as _, Write};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

/// Width of the step-name column.
const NAME_WIDTH: usize = 60;
/// How often the live line is redrawn.
const TICK: Duration = Duration::from_millis(100);
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Whether a live line is on screen; every write to the terminal holds this
/// lock, so a log record and a redraw never interleave.
static TERMINAL: Mutex<bool> = Mutex::new(false);

fn terminal() -> MutexGuard<'static, bool> {
    TERMINAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// How a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It held.
    Ok,
    /// It did not.
    Failed,
}

/// `1.23s` under a minute, `2m05s` above.
pub fn format_elapsed(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.2}s")
    } else {
        let whole = d.as_secs();
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

/// The final line of a step, e.g. `✔ Create BucketClaim default/photos ... 0.02s`.
/// `tty` picks symbols (`✔`/`✘`) over bracketed words (`[ ok ]`/`[FAIL]`).
pub fn final_line(outcome: Outcome, name: &str, elapsed: Duration, tty: bool) -> String {
    let mark = match (outcome, tty) {
        (Outcome::Ok, true) => "\x1b[32m✔\x1b[0m",
        (Outcome::Failed, true) => "\x1b[31m✘\x1b[0m",
        (Outcome::Ok, false) => "[ ok ]",
        (Outcome::Failed, false) => "[FAIL]",
    };
    format!("{mark} {name:<NAME_WIDTH$} {:>7}", format_elapsed(elapsed))
}

/// The live line of a running step on a terminal (no colour, no newline).
pub fn live_line(tick: usize, name: &str, elapsed: Duration, waiting: &str) -> String {
    let spinner = SPINNER[tick % SPINNER.len()];
    let mut line = format!(
        "{spinner} {name:<NAME_WIDTH$} {:>7}",
        format_elapsed(elapsed)
    );
    if !waiting.is_empty() {
        let _ = write!(line, "  {waiting}");
    }
    line
}

/// The plain line printed when a step starts waiting for something new.
pub fn waiting_line(waiting: &str) -> String {
    format!("       … {waiting}")
}

/// The step display. One step runs at a time.
#[derive(Debug)]
pub struct Progress {
    tty: bool,
    started: Instant,
    steps: usize,
}

impl Progress {
    /// A display that is live when stdout is a terminal.
    pub fn new() -> Self {
        Self::with_tty(std::io::stdout().is_terminal())
    }

    /// A display that is live (`true`) or plain (`false`).
    pub fn with_tty(tty: bool) -> Self {
        Self {
            tty,
            started: Instant::now(),
            steps: 0,
        }
    }

    /// True when the display redraws a live line.
    pub fn is_tty(&self) -> bool {
        self.tty
    }

    /// Time since the display was created.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// How many steps were started.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// Prints a line outside any step.
    pub fn line(&self, text: &str) {
        print_line(text);
    }

    /// Starts a step; finish it with [`Step::ok`] or [`Step::fail`].
    pub fn step(&mut self, name: impl Into<String>) -> Step {
        self.steps += 1;
        let state = Arc::new(Mutex::new(Live {
            name: name.into(),
            waiting: String::new(),
        }));
        let started = Instant::now();
        let ticker = self.tty.then(|| {
            let state = state.clone();
            tokio::spawn(async move {
                let mut tick = 0usize;
                loop {
                    {
                        let live = state.lock().unwrap_or_else(|e| e.into_inner());
                        let line = live_line(tick, &live.name, started.elapsed(), &live.waiting);
                        let mut on_screen = terminal();
                        let mut out = std::io::stdout().lock();
                        let _ = write!(out, "\r\x1b[2K{line}");
                        let _ = out.flush();
                        *on_screen = true;
                    }
                    tick += 1;
                    tokio::time::sleep(TICK).await;
                }
            })
        });
        Step {
            tty: self.tty,
            state,
            started,
            ticker,
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Debug)]
struct Live {
    name: String,
    waiting: String,
}

/// A running step.
#[derive(Debug)]
pub struct Step {
    tty: bool,
    state: Arc<Mutex<Live>>,
    started: Instant,
    ticker: Option<JoinHandle<()>>,
}

impl Step {
    /// Says what the step is waiting for now (e.g. a condition's reason).
    /// On a plain display a line is printed only when this changes.
    pub fn waiting(&self, what: impl Into<String>) {
        let what = what.into();
        let mut live = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if live.waiting == what {
            return;
        }
        if !self.tty && !what.is_empty() {
            print_line(&waiting_line(&what));
        }
        live.waiting = what;
    }

    /// Renames the step (e.g. once an address is known).
    pub fn rename(&self, name: impl Into<String>) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).name = name.into();
    }

    /// Time since the step started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Ends the step as held, then prints `details` indented beneath it.
    pub fn ok<S: AsRef<str>>(self, details: &[S]) {
        self.finish(Outcome::Ok, details);
    }

    /// Ends the step as failed, then prints `details` indented beneath it.
    pub fn fail<S: AsRef<str>>(self, details: &[S]) {
        self.finish(Outcome::Failed, details);
    }

    fn finish<S: AsRef<str>>(mut self, outcome: Outcome, details: &[S]) {
        self.stop_ticker();
        let name = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .name
            .clone();
        let mut text = final_line(outcome, &name, self.started.elapsed(), self.tty);
        for d in details {
            for line in d.as_ref().lines() {
                let _ = write!(text, "\n         {line}");
            }
        }
        print_line(&text);
    }

    fn stop_ticker(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.abort();
        }
    }
}

impl Drop for Step {
    fn drop(&mut self) {
        self.stop_ticker();
    }
}

/// Prints whole lines, first erasing a live line if one is on screen.
fn print_line(text: &str) {
    let mut on_screen = terminal();
    let mut out = std::io::stdout().lock();
    if *on_screen {
        let _ = write!(out, "\r\x1b[2K");
        *on_screen = false;
    }
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// A `tracing` writer to stderr that erases the live progress line before
/// each record (the line is redrawn on the next tick).
#[derive(Clone, Copy, Debug, Default)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut on_screen = terminal();
        if *on_screen {
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "\r\x1b[2K");
            let _ = out.flush();
            *on_screen = false;
        }
        std::io::stderr().lock().write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_is_shown_in_seconds_under_a_minute_and_minutes_above() {
        assert_eq!(format_elapsed(Duration::from_millis(40)), "0.04s");
        assert_eq!(format_elapsed(Duration::from_millis(12_345)), "12.35s");
        assert_eq!(format_elapsed(Duration::from_secs(125)), "2m05s");
    }

    #[test]
    fn plain_final_lines_use_words_and_align_the_time_column() {
        let ok = final_line(
            Outcome::Ok,
            "Create the classes",
            Duration::from_millis(10),
            false,
        );
        let failed = final_line(
            Outcome::Failed,
            "Wait for the bucket",
            Duration::from_secs(3),
            false,
        );
        assert!(ok.starts_with("[ ok ] Create the classes "));
        assert!(failed.starts_with("[FAIL] Wait for the bucket "));
        assert!(ok.ends_with("0.01s") && failed.ends_with("3.00s"));
        assert_eq!(ok.chars().count(), failed.chars().count());
    }

    #[test]
    fn terminal_final_lines_use_coloured_symbols() {
        let ok = final_line(Outcome::Ok, "x", Duration::ZERO, true);
        let failed = final_line(Outcome::Failed, "x", Duration::ZERO, true);
        assert!(ok.contains('✔') && ok.contains("\x1b[32m"));
        assert!(failed.contains('✘') && failed.contains("\x1b[31m"));
    }

    #[test]
    fn live_line_shows_spinner_time_and_what_is_awaited() {
        let line = live_line(
            1,
            "Wait for the bucket",
            Duration::from_millis(1500),
            "Provisioned=Unknown",
        );
        assert!(line.starts_with('⠙'));
        assert!(line.contains("1.50s  Provisioned=Unknown"));
        let idle = live_line(10, "Wait", Duration::ZERO, "");
        assert!(idle.starts_with('⠋') && idle.ends_with("0.00s"));
    }

    #[test]
    fn waiting_line_is_indented_under_the_step() {
        assert_eq!(
            waiting_line("sidecar: starting"),
            "       … sidecar: starting"
        );
    }
}
