//! A sampling profiler: every rank's stacks, sampled periodically for a bounded time, summed
//! into folded stacks (the input of flamegraph tools).
//!
//! ```text
//! cargo run -p mpir-examples --example stack_sampler -- STARTER_PID [DURATION_MS [INTERVAL_MS]]
//! ```
//!
//! Through `mpir_session` only: the job is read from the running starter without touching any
//! rank; the first sample proves each rank to be the table's (the session's hold) and from then
//! on each process is stopped only for its own snapshot (registers and stack bytes copied, then
//! let go) and unwound offline, with the CFI and symbols of its images read once for the whole
//! run. A sample in which a process stayed stopped longer than 5 ms is reported. Prints a line
//! per sample (`sample S: R ranks read, longest stop T us`), then the folded stacks
//! (`_start;…;main;… N`, N threads over all samples) and a summary line.

use std::ops::ControlFlow;
use std::time::Duration;

use mpir_session::{FoldedStacks, Session, SessionOptions, StackOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: stack_sampler STARTER_PID [DURATION_MS [INTERVAL_MS]]";
    let pid: u32 = args.first().ok_or(usage)?.parse()?;
    let duration = Duration::from_millis(args.get(1).map_or(Ok(1000), |s| s.parse())?);
    let interval = Duration::from_millis(args.get(2).map_or(Ok(50), |s| s.parse())?.max(1));
    let max_samples = u32::try_from(duration.as_millis() / interval.as_millis())
        .unwrap_or(u32::MAX)
        .max(1);

    // Whatever happens to this program, the ranks it holds are let go.
    mpir_session::install_cleanup()?;
    let mut session = Session::attach(pid, SessionOptions::default())?;
    let options = StackOptions::default()
        .with_interval(interval)
        .with_max_stop(Some(Duration::from_millis(5)));
    let mut folded = FoldedStacks::default();
    let summary = session.sample_stacks(&options, max_samples, |sample| {
        let longest = sample.max_stop().unwrap_or_default();
        print!(
            "sample {}: {} ranks read, longest stop {} us",
            sample.index,
            sample.ranks.len(),
            longest.as_micros()
        );
        if !sample.overran.is_empty() {
            print!(", over 5 ms: ranks {:?}", sample.overran);
        }
        println!();
        for u in &sample.unreached {
            println!(
                "sample {}: rank {} not read: {}",
                sample.index, u.rank, u.reason
            );
        }
        folded.add(&sample.tree);
        ControlFlow::Continue(())
    })?;
    print!("{folded}");
    println!(
        "{} samples, {} over the bound, longest stop {} us",
        summary.samples,
        summary.overran,
        summary.max_stop.as_micros()
    );
    Ok(())
}
