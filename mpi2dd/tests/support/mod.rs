//! Test support for mpi2dd's integration tests (a trimmed copy of mpir-target's): the
//! reference provider and fixtures compiled at test time, scratch directories, children that
//! are killed with their process group, gdb's `ptype/o` as the layout oracle, and
//! skip-or-fail for missing tools.
#![allow(dead_code, unused_imports, unreachable_pub, missing_docs)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub use mpir_target::testkit::{
    Scratch, assert_untouched, have, run, scratch, skip, status_field, wait_for,
};

pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Compiles `sources` (relative to the crate) with `cc`, the provider's directory on the
/// include path, into `out`.
pub fn cc(out: &Path, flags: &[&str], sources: &[&str]) -> Result<PathBuf, String> {
    let mut cmd = Command::new("cc");
    cmd.arg(format!("-I{}", crate_dir().join("provider").display()))
        .args(["-Wall", "-Wextra", "-Werror"])
        .args(flags);
    for s in sources {
        cmd.arg(crate_dir().join(s));
    }
    run(cmd.arg("-o").arg(out))?;
    Ok(out.to_path_buf())
}

/// Builds the fixture job (provider + `tests/fixtures/job.c`); `None` after a skip.
pub fn build_job(dir: &Path) -> Option<PathBuf> {
    cc(
        &dir.join("job"),
        &["-O2", "-g"],
        &["provider/mpi2dd_provider.c", "tests/fixtures/job.c"],
    )
    .map_err(|e| skip(&e))
    .ok()
}

/// A child in its own process group with piped stdin and stdout; the whole group is killed
/// when dropped (a failed test leaves nothing running).
pub struct Spawned {
    pub child: Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Spawned {
    pub fn new(cmd: &mut Command) -> Spawned {
        use std::os::unix::process::CommandExt;
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let out = BufReader::new(child.stdout.take().unwrap());
        Spawned { child, out }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The next line of its stdout, without the newline.
    pub fn line(&mut self) -> String {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }

    /// Writes `text` and a newline to its stdin.
    pub fn send(&mut self, text: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{text}").unwrap();
        stdin.flush().unwrap();
    }

    /// Closes its stdin and waits for it.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.child.stdin.take());
        self.child.wait().unwrap()
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = self.child.wait();
    }
}

/// The running fixture job: its metadirectory and directories.
pub struct RunningJob {
    pub meta: Spawned,
    pub dirs: Vec<i32>,
}

impl RunningJob {
    pub fn start(exe: &Path, dirs: usize, per_dir: usize) -> RunningJob {
        let mut meta =
            Spawned::new(Command::new(exe).args(["meta", &dirs.to_string(), &per_dir.to_string()]));
        let line = meta.line();
        let dirs = line
            .split_once("dirs=")
            .unwrap_or_else(|| panic!("not a ready line: {line:?}"))
            .1
            .split(',')
            .map(|p| p.parse().unwrap())
            .collect();
        assert!(
            line.starts_with(&format!("ready meta={} ", meta.pid())),
            "{line}"
        );
        RunningJob { meta, dirs }
    }

    pub fn meta_pid(&self) -> i32 {
        self.meta.pid() as i32
    }

    /// Asks directory `dir` to spawn `n` ranks from `parent_rank`; returns their pids.
    pub fn spawn(&mut self, dir: usize, parent_rank: i32, n: usize) -> Vec<i32> {
        self.meta.send(&format!("spawn {dir} {parent_rank} {n}"));
        self.read_spawned()
    }

    pub fn read_spawned(&mut self) -> Vec<i32> {
        let line = self.meta.line();
        line.strip_prefix("spawned ")
            .unwrap_or_else(|| panic!("not a spawned line: {line:?}"))
            .split(',')
            .map(|p| p.parse().unwrap())
            .collect()
    }
}

/// This machine's host name, as the fixture's gethostname() gives it.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// The parent pid of `pid`, from `/proc/PID/stat` (field 4, after the parenthesised name).
pub fn ppid(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A struct as gdb's `ptype/o` shows it: total size and top-level members (offset, size).
#[derive(Debug)]
pub struct GdbLayout {
    pub size: u64,
    pub members: HashMap<String, (u64, u64)>,
}

/// `ptype/o` of each type in `file` (flat structs only: members are scalars, pointers or
/// arrays).
pub fn gdb_ptype(file: &Path, types: &[&str]) -> Result<Vec<GdbLayout>, String> {
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-batch"]);
    for t in types {
        cmd.args(["-ex", &format!("ptype/o {t}")]);
    }
    let text = run(cmd.arg(file))?;
    let mut layouts = Vec::new();
    let mut members = HashMap::new();
    for line in text.lines() {
        if let Some(total) = line.split("total size (bytes):").nth(1) {
            let size = total
                .trim()
                .trim_end_matches("*/")
                .trim()
                .parse()
                .map_err(|e| format!("{line}: {e}"))?;
            layouts.push(GdbLayout {
                size,
                members: std::mem::take(&mut members),
            });
            continue;
        }
        // "/*      8      |       4 */    MPI2DD_UINT32_T debugger_flags;"
        let Some(rest) = line.trim_start().strip_prefix("/*") else {
            continue;
        };
        let Some((nums, code)) = rest.split_once("*/") else {
            continue;
        };
        let Some((off, size)) = nums.split_once('|') else {
            continue;
        };
        let (Ok(off), Ok(size)) = (off.trim().parse::<u64>(), size.trim().parse::<u64>()) else {
            continue;
        };
        let decl = code.trim().trim_end_matches(';');
        let name = decl
            .split('[')
            .next()
            .unwrap()
            .rsplit([' ', '*'])
            .next()
            .unwrap()
            .to_string();
        members.insert(name, (off, size));
    }
    if layouts.len() != types.len() {
        return Err(format!(
            "gdb described {} of {} types:\n{text}",
            layouts.len(),
            types.len()
        ));
    }
    Ok(layouts)
}

/// Checks that `ours` and gdb agree on the size and on every member's offset and size.
pub fn assert_matches_gdb(what: &str, ours: &mpir_types::TypeLayout, gdb: &GdbLayout) {
    assert_eq!(ours.byte_size, gdb.size, "{what}: size");
    assert_eq!(
        ours.members.len(),
        gdb.members.len(),
        "{what}: members {:?} vs gdb {:?}",
        ours.members,
        gdb.members
    );
    for (name, (off, size)) in &gdb.members {
        let m = ours
            .member(name)
            .unwrap_or_else(|| panic!("{what}: member {name} missing in {ours:?}"));
        assert_eq!(m.offset, *off, "{what}.{name}: offset");
        assert_eq!(m.byte_size, Some(*size), "{what}.{name}: size");
    }
}
