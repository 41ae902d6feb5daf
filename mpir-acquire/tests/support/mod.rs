//! Test support for mpir-acquire's live tests: C fixtures compiled at test time, skip-or-fail
//! for missing MPI stacks, and process-state checks.
#![allow(dead_code, unused_imports, unreachable_pub, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub use mpir_target::testkit::{
    IMPI_WHEEL, MPICH5_WHEEL, OMPI5_WHEEL, Scratch, Wheel, assert_code_as_in_file,
    assert_untouched, entry_point, have, run, scratch, skip, status_field, symbol_address,
    wait_for,
};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Compiles fixture `name`.c into `dir` with extra flags; `None` (and a skip) without a C
/// compiler.
pub fn build(dir: &Path, name: &str, out: &str, flags: &[&str]) -> Option<PathBuf> {
    let exe = dir.join(out);
    let r = run(Command::new("cc")
        .args(flags)
        .arg("-pthread")
        .arg(fixtures().join(format!("{name}.c")))
        .arg("-o")
        .arg(&exe));
    match r {
        Ok(_) => Some(exe),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

/// The (rank, pid) pairs a job's ranks printed ("rank R pid P").
pub fn printed_ranks(output: &str) -> Vec<(u64, i64)> {
    let mut v: Vec<(u64, i64)> = output
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["rank", r, "pid", p] => Some((r.parse().ok()?, p.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    v.sort_unstable();
    v
}

/// Whether `pid` runs (exists and is not a zombie).
pub fn is_running(pid: u32) -> bool {
    let s = status_field(pid, "State:");
    !s.is_empty() && !s.starts_with('Z')
}

/// The value of the C `int` variable `name` in process `pid`.
pub fn read_int(pid: u32, name: &str) -> i64 {
    use mpir_target::{MemoryExt, SymbolLookupExt};
    let t = mpir_target::live::LiveTarget::open(pid, Default::default()).unwrap();
    let a = t.require_symbol(name).unwrap().address;
    t.read_c_int(a, name).unwrap()
}

/// Waits (up to 20 s) until the starter `pid` has announced its spawn (`MPIR_debug_state` is
/// `MPIR_DEBUG_SPAWNED`): its ranks print before it fills the table and calls
/// `MPIR_Breakpoint`, and a tool attaching in that window catches the spawn event (and holds
/// the ranks to open the gate, as the spec says), which a test of a running job must not.
pub fn wait_spawned(pid: u32) {
    assert!(
        wait_for(20, || read_int(pid, "MPIR_debug_state") == 1),
        "starter {pid} never announced its spawn"
    );
}

/// The job's output lines with every pid replaced by `P`, sorted: what must not change
/// between an undisturbed run and a disturbed one.
pub fn normalized(output: &str) -> Vec<String> {
    let mut v: Vec<String> = output
        .lines()
        .map(|l| {
            let mut out = Vec::new();
            let mut mask = false;
            for w in l.split_whitespace() {
                if mask {
                    out.push("P".to_string());
                    mask = false;
                } else if let Some(rest) = w.strip_prefix("pid=") {
                    out.push(format!("pid={}", if rest.is_empty() { "" } else { "P" }));
                } else {
                    mask = w == "pid";
                    out.push(w.to_string());
                }
            }
            out.join(" ")
        })
        .collect();
    v.sort();
    v
}

/// `error` with every source under it, joined with `: ` (as a tool reports it: errors print
/// their own context, their sources say why).
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut next = error.source();
    while let Some(e) = next {
        out.push_str(": ");
        out.push_str(&e.to_string());
        next = e.source();
    }
    out
}

/// A child's stdout, read line by line on a thread (a test never blocks on it).
pub struct Output(pub std::sync::Arc<std::sync::Mutex<String>>);

impl Output {
    /// Starts reading `child`'s piped stdout.
    pub fn of(child: &mut std::process::Child) -> Output {
        use std::io::BufRead;
        let buf = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout piped");
        let b = std::sync::Arc::clone(&buf);
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                let mut s = b.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Output(buf)
    }

    /// Everything read so far.
    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }
}
