//! Test support shared by mpir-target's integration tests: C fixtures compiled at test time,
//! gdb as the layout oracle, and skip-or-fail for missing tools.
#![allow(dead_code, unused_imports, unreachable_pub, missing_docs)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use mpir_types::FieldLayout;

mod bt;
pub use bt::*;

pub use mpir_target::testkit::{
    Scratch, assert_untouched, have, run, scratch, skip, status_field, wait_for,
};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Compiles `args` with the system C compiler (`cc`), with the fixtures directory on the
/// include path, into `out`.
pub fn cc(out: &Path, args: &[&str]) -> Result<PathBuf, String> {
    run(Command::new("cc")
        .arg(format!("-I{}", fixtures().display()))
        .args(args)
        .arg("-o")
        .arg(out))?;
    Ok(out.to_path_buf())
}

/// A child with piped stdin and stdout, killed when dropped (a failed test leaves nothing
/// running).
pub struct Spawned {
    pub child: Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Spawned {
    /// Spawns `cmd` with stdin and stdout piped.
    pub fn new(cmd: &mut Command) -> Spawned {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let out = BufReader::new(child.stdout.take().unwrap());
        Spawned { child, out }
    }

    /// Wraps a child started with stdin and stdout piped (e.g. by the tracer's launch).
    pub fn adopt(mut child: Child) -> Spawned {
        let out = BufReader::new(child.stdout.take().expect("stdout piped"));
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
        writeln!(self.child.stdin.as_mut().unwrap(), "{text}").unwrap();
    }

    /// The rest of its stdout.
    pub fn rest(&mut self) -> String {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut self.out, &mut rest).unwrap();
        rest
    }

    /// Closes its stdin and waits for it.
    pub fn finish(mut self) -> std::process::ExitStatus {
        drop(self.child.stdin.take());
        self.child.wait().unwrap()
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running fixture: its pid and the addresses it printed on its first line.
pub struct Running {
    pub spawned: Spawned,
    pub printed: HashMap<String, u64>,
}

impl Running {
    pub fn start(exe: &Path, env: &[(&str, &str)]) -> Running {
        let mut spawned = Spawned::new(Command::new(exe).envs(env.iter().copied()));
        let printed = spawned
            .line()
            .split_whitespace()
            .filter_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                Some((
                    k.to_string(),
                    u64::from_str_radix(v.trim_start_matches("0x"), 16).ok()?,
                ))
            })
            .collect();
        Running { spawned, printed }
    }

    pub fn pid(&self) -> u32 {
        self.spawned.pid()
    }

    /// Closes stdin and waits: the fixture exits 0 if all went well.
    pub fn finish(self) -> i32 {
        self.spawned.finish().code().unwrap_or(-1)
    }
}

/// A struct as gdb's `ptype/o` shows it: total size and top-level members (offset, size; size
/// `None` for bitfields).
#[derive(Debug)]
pub struct GdbLayout {
    pub size: u64,
    pub members: HashMap<String, (u64, Option<u64>)>,
}

/// `ptype/o` of each type in `file`, top-level members only.
pub fn gdb_ptype(file: &Path, types: &[&str]) -> Result<Vec<GdbLayout>, String> {
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-batch"]);
    for t in types {
        cmd.args(["-ex", &format!("ptype/o {t}")]);
    }
    let text = run(cmd.arg(file))?;
    parse_ptype(&text, types.len())
}

/// Parses `count` `ptype/o` outputs.
pub fn parse_ptype(text: &str, count: usize) -> Result<Vec<GdbLayout>, String> {
    let mut layouts = Vec::new();
    let mut members = HashMap::new();
    let mut depth = 0i32;
    for line in text.lines() {
        let code = line.split("*/").last().unwrap_or("").trim();
        if line.contains("total size (bytes):") {
            if depth <= 1 {
                let total = line
                    .split("total size (bytes):")
                    .nth(1)
                    .unwrap()
                    .trim()
                    .trim_end_matches("*/")
                    .trim()
                    .parse()
                    .map_err(|e| format!("{line}: {e}"))?;
                if depth == 1 {
                    layouts.push(GdbLayout {
                        size: total,
                        members: std::mem::take(&mut members),
                    });
                }
            }
            continue;
        }
        let opens = code.ends_with('{');
        if depth == 1
            && !opens
            && let Some(rest) = line.trim_start().strip_prefix("/*")
            && let Some((nums, _)) = rest.split_once("*/")
            && !nums.contains("XXX")
            && !nums.contains("offset")
            // Union members have a size but no offset column: they are all at 0.
            && let Some((off, size)) = nums.split_once('|').or(Some(("0", nums)))
        {
            let decl = code.trim_end_matches(';');
            let decl = decl.split(" : ").next().unwrap(); // bitfield width
            let name = decl
                .split('[')
                .next()
                .unwrap()
                .rsplit([' ', '*'])
                .next()
                .unwrap()
                .to_string();
            let (off, bitfield) = match off.split_once(':') {
                Some((byte, _bit)) => (byte.trim().parse().unwrap(), true),
                None => (off.trim().parse().unwrap(), false),
            };
            let size: u64 = size.trim().parse().unwrap();
            members.insert(name, (off, (!bitfield).then_some(size)));
        } else if depth == 1
            && opens
            && let Some(rest) = line.trim_start().strip_prefix("/*")
            && let Some((nums, _)) = rest.split_once("*/")
            && let Some((off, size)) = nums.split_once('|')
            && !code.starts_with("union {")
            && !code.starts_with("struct {")
        {
            // A named member of struct type: "struct zoo_inner {" ... "} in;"
            members.insert(
                format!("@pending:{}", off.trim()),
                (off.trim().parse().unwrap(), size.trim().parse().ok()),
            );
        }
        if depth == 2 && code.starts_with('}') && code.len() > 1 {
            // Closing a nested named member: "} in;" names the pending one.
            let name = code
                .trim_start_matches('}')
                .trim()
                .trim_end_matches(';')
                .to_string();
            if let Some(key) = members.keys().find(|k| k.starts_with("@pending:")).cloned()
                && !name.is_empty()
            {
                let v = members.remove(&key).unwrap();
                members.insert(name, v);
            }
        }
        depth += code.matches('{').count() as i32;
        depth -= code.matches('}').count() as i32;
    }
    members.retain(|k, _| !k.starts_with("@pending:"));
    if layouts.len() != count {
        return Err(format!(
            "gdb described {} of {count} types:\n{text}",
            layouts.len()
        ));
    }
    Ok(layouts)
}

/// Checks that `ours` has every member gdb lists at the same offset and size.
pub fn assert_matches_gdb(what: &str, ours: &mpir_types::TypeLayout, gdb: &GdbLayout) {
    assert_eq!(ours.byte_size, gdb.size, "{what}: size");
    assert!(!gdb.members.is_empty(), "{what}: gdb listed no members");
    for (name, (off, size)) in &gdb.members {
        let m = ours
            .member(name)
            .unwrap_or_else(|| panic!("{what}: member {name} missing in {ours:?}"));
        assert_eq!(m.offset, *off, "{what}.{name}: offset");
        if size.is_some() {
            assert_eq!(m.byte_size, *size, "{what}.{name}: size");
        }
    }
}

/// For the ABI oracle: (size, member -> field) of simple structs.
/// A struct's size and its members as fields.
pub type Fields = (u64, HashMap<String, FieldLayout>);

pub fn gdb_fields(file: &Path, types: &[&str]) -> Result<Vec<Fields>, String> {
    Ok(gdb_ptype(file, types)?
        .into_iter()
        .map(|l| {
            (
                l.size,
                l.members
                    .into_iter()
                    .map(|(k, (o, s))| (k, FieldLayout::new(o, s.unwrap_or(0))))
                    .collect(),
            )
        })
        .collect())
}

/// Where gdb says each symbol is: `gdb -batch -iex <setup>... <target args> -ex 'info address
/// NAME'...`.
pub fn gdb_addresses(
    setup: &[&str],
    target: &[&str],
    names: &[&str],
) -> Result<HashMap<String, u64>, String> {
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-batch"]);
    // -iex: before the target file is loaded (settings like debug-file-directory).
    for s in setup {
        cmd.args(["-iex", s]);
    }
    cmd.args(target);
    for n in names {
        cmd.args(["-ex", &format!("info address {n}")]);
    }
    let text = run(&mut cmd)?;
    let mut out = HashMap::new();
    for line in text.lines() {
        // Symbol "MPIR_proctable" is at 0x7fe2ba58a360 in a file compiled without debugging.
        // Symbol "MPIR_proctable" is static storage at address 0x5555....
        let Some(rest) = line.strip_prefix("Symbol \"") else {
            continue;
        };
        let Some((name, tail)) = rest.split_once('"') else {
            continue;
        };
        if let Some(hex) = tail.split("0x").nth(1) {
            let hex: String = hex.chars().take_while(char::is_ascii_hexdigit).collect();
            if let Ok(a) = u64::from_str_radix(&hex, 16) {
                out.insert(name.to_string(), a);
            }
        }
    }
    Ok(out)
}

/// A child process killed (with its process group) when dropped.
pub struct Job(pub Child);

impl Job {
    pub fn spawn(cmd: &mut Command) -> Result<Job, String> {
        use std::os::unix::process::CommandExt;
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map(Job)
            .map_err(|e| format!("cannot start {cmd:?}: {e}"))
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        // The whole process group: the starter and the ranks it spawned.
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.0.id())])
            .status();
        let _ = self.0.wait();
    }
}

/// Builds `fixtures/fake_starter.c`; `None` (after skip) without a C compiler.
pub fn build_fake_starter(dir: &Path) -> Option<PathBuf> {
    let src = fixtures().join("fake_starter.c");
    cc(&dir.join("fake_starter"), &["-O2", "-g", src.to_str()?])
        .map_err(|e| skip(&e))
        .ok()
}

/// A running fake starter (its table filled), killed when dropped.
pub struct FakeStarter {
    pub spawned: Spawned,
    pub table: u64,
}

impl FakeStarter {
    pub fn start(exe: &Path, n: usize, mode: &str) -> FakeStarter {
        let mut spawned = Spawned::new(Command::new(exe).args([n.to_string().as_str(), mode]));
        let table = parse_table(&spawned.line());
        FakeStarter { spawned, table }
    }

    pub fn pid(&self) -> u32 {
        self.spawned.pid()
    }

    /// Asks it to print `MPIR_being_debugged`.
    pub fn show(&mut self) -> String {
        self.spawned.send("show");
        self.spawned.line()
    }

    pub fn finish(self) -> bool {
        self.spawned.finish().success()
    }
}

/// The table address from a fake starter's "table=0x... being_debugged=0x..." line.
pub fn parse_table(line: &str) -> u64 {
    let first = line.split_whitespace().next().unwrap_or_default();
    u64::from_str_radix(first.trim_start_matches("table=0x"), 16)
        .unwrap_or_else(|_| panic!("not a fake starter line: {line:?}"))
}
