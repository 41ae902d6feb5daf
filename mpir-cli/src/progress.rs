//! What the tool says while it works: a progress bar on a terminal (none when piped), and
//! `-v` logs through `tracing`.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// Sets up `tracing` output on stderr at the level `-v` asked for (`RUST_LOG` overrides).
pub(crate) fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => return,
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(true)
        .try_init();
}

/// A bar counting `len` steps named `what`, drawn on stderr when it is a terminal; hidden
/// otherwise (and then free).
pub(crate) fn bar(len: u64, what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} {msg} {bar:30} {pos}/{len} {elapsed}")
    {
        bar.set_style(style);
    }
    bar.set_message(what.to_string());
    bar
}

/// A spinner for a step of unknown length (acquisition), drawn on a terminal only.
pub(crate) fn spinner(what: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner();
    bar.set_message(what.to_string());
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

/// A bar for a stacks read: this node's ranks read over every sample; once they are, the
/// message says the other nodes' agents are awaited (when there are any).
pub(crate) fn stacks_bar(agents: bool) -> (ProgressBar, impl FnMut(mpir_session::StackProgress)) {
    let bar = bar(0, "reading stacks");
    let handle = bar.clone();
    let tell = move |p: mpir_session::StackProgress| {
        handle.set_length(u64::from(p.samples) * p.total as u64);
        handle.set_position(u64::from(p.sample - 1) * p.total as u64 + p.done as u64);
        if agents && p.sample == p.samples && p.done == p.total {
            handle.set_message("waiting for the other nodes' agents");
        }
    };
    (bar, tell)
}
