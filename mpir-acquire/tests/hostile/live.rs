//! Live processes: a C starter (`tests/fixtures/hostile_starter.c`) lays its hostile table
//! out in real memory — `PROT_NONE` pages, unmapped pages, a 1 MiB string, lying sizes — and
//! processes that are zombies or exit while they are read. Reads go through `LiveTarget`
//! (`process_vm_readv`, `/proc/PID/mem`); the acquisition case attaches for real and must
//! leave every process as found.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_acquire::{AcquireError, AcquireOptions, RankControl, live};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::Tracer;
use mpir_target::proctable::{ProcTable, ReadOptions, read_proctable};
use mpir_target::{Fault, TargetError};
use mpir_types::DecodeError;
use mpir_types::mpir::{ProblemKind, symbols};

use super::harness::{LIVE, run};
use super::support::{assert_untouched, build, have, read_int, scratch, skip, wait_for};

/// A running hostile starter: its pid, the addresses it printed, its children (the ranks).
struct Hostile {
    child: Child,
    table: u64,
    strings: u64,
    _dir: super::support::Scratch,
}

impl Hostile {
    fn start(mode: &str, extra: &[&str]) -> Option<Hostile> {
        let dir = scratch(&format!("hostile-live-{mode}"));
        let exe = build(&dir, "hostile_starter", "hostile_starter", &["-g", "-O1"])?;
        let mut child = Command::new(exe)
            .arg(mode)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let hex = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
                .unwrap_or(0) // "(nil)"
        };
        assert!(line.starts_with("ready"), "{line}");
        Some(Hostile {
            table: hex("table="),
            strings: hex("strings="),
            child,
            _dir: dir,
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads its table through a `LiveTarget`, within the live bounds.
    fn read(&self, name: &str) -> Result<ProcTable, TargetError> {
        let pid = self.pid();
        run(
            name,
            LIVE,
            move || LiveTarget::open(pid, DebugOptions::default()).unwrap(),
            |t| read_proctable(&t, &ReadOptions::default()),
        )
    }

    /// Closes its stdin (the children end, then it) and checks it exits 0.
    fn finish(mut self) {
        let _ = self.child.stdin.take().map(|mut s| s.flush());
        drop(self.child.stdin.take());
        assert!(self.child.wait().unwrap().success());
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

#[test]
fn live_strings_in_prot_none_pages_are_read_as_gdb_reads_them() {
    let Some(h) = Hostile::start("protnone", &[]) else {
        return;
    };
    let table = h.read("live PROT_NONE strings").unwrap();
    // /proc/PID/mem reads PROT_NONE pages as a debugger does: the names are there.
    let hosts: Vec<_> = table.resolved.ranks().map(|r| r.host).collect();
    assert_eq!(hosts, [Some("hidden-host"), Some("hidden-host")]);
    assert!(table.resolved.problems.is_empty());
    // The independent oracle: gdb prints the same string from the same page.
    if have("gdb") {
        let out = Command::new("gdb")
            .args(["-nx", "-batch", "-p", &h.pid().to_string()])
            .args(["-ex", "print MPIR_proctable[0].host_name"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&format!("{:#x}", h.strings + 8)) && text.contains("\"hidden-host\""),
            "{text}"
        );
    } else {
        skip("gdb not installed: the PROT_NONE names are not cross-checked");
    }
    assert_untouched(h.pid());
    h.finish();
}

#[test]
fn live_string_unterminated_from_a_prot_none_page_into_an_unmapped_one() {
    let Some(h) = Hostile::start("unterminated", &[]) else {
        return;
    };
    let table = h.read("live unterminated string").unwrap();
    let p = &table.resolved.problems;
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(
        matches!(&p[0].kind, ProblemKind::Unreadable { address, reason }
            if *address == h.strings + 100 && reason.contains("short read")),
        "{p:?}"
    );
    h.finish();
}

#[test]
fn live_one_mebibyte_string() {
    let Some(h) = Hostile::start("mib", &[]) else {
        return;
    };
    let table = h.read("live 1 MiB string").unwrap();
    let p = &table.resolved.problems;
    assert!(
        matches!(&p[0].kind, ProblemKind::Unreadable { address, reason }
            if *address == h.strings && reason.contains("no NUL within 4096")),
        "{p:?}"
    );
    h.finish();
}

#[test]
fn live_size_int_max() {
    let Some(h) = Hostile::start("intmax", &[]) else {
        return;
    };
    let e = h.read("live INT_MAX size").unwrap_err();
    assert!(
        matches!(&e, TargetError::Decode(DecodeError::TooLarge { what, value, .. })
            if what == symbols::PROCTABLE_SIZE && *value == i32::MAX as u64),
        "{e}"
    );
    h.finish();
}

#[test]
fn live_negative_size() {
    let Some(h) = Hostile::start("negative", &[]) else {
        return;
    };
    let e = h.read("live negative size").unwrap_err();
    assert!(
        matches!(
            &e,
            TargetError::Decode(DecodeError::Negative { value: -1, .. })
        ),
        "{e}"
    );
    h.finish();
}

#[test]
fn live_table_pointer_into_an_unmapped_page() {
    let Some(h) = Hostile::start("unmapped", &[]) else {
        return;
    };
    let e = h.read("live unmapped table").unwrap_err();
    assert!(
        matches!(e, TargetError::Unreadable { address, .. } if address == h.table),
        "{e}"
    );
    h.finish();
}

#[test]
fn live_null_table_with_entries() {
    let Some(h) = Hostile::start("null", &[]) else {
        return;
    };
    let e = h.read("live NULL table").unwrap_err();
    assert!(
        matches!(&e, TargetError::InvalidValue { problem, .. } if problem.contains("NULL")),
        "{e}"
    );
    h.finish();
}

#[test]
fn live_table_in_a_prot_none_page() {
    let Some(h) = Hostile::start("tableprotnone", &[]) else {
        return;
    };
    // As with strings: read as a debugger reads it.
    let table = h.read("live PROT_NONE table").unwrap();
    assert_eq!(table.table_address, h.table);
    assert_eq!(table.resolved.entries.len(), 2);
    assert!(table.resolved.problems.is_empty());
    h.finish();
}

#[test]
fn live_process_exits_while_it_is_read() {
    let Some(mut h) = Hostile::start("exit", &["500"]) else {
        return;
    };
    let pid = h.pid();
    // Read over and over until the process is gone: every read is a table or a typed error.
    let outcome = run(
        "live exit mid-read",
        LIVE,
        move || LiveTarget::open(pid, DebugOptions::default()).unwrap(),
        |t| {
            let mut ok = 0u32;
            loop {
                match read_proctable(&t, &ReadOptions::default()) {
                    Ok(table) => {
                        assert_eq!(table.resolved.entries.len(), 2);
                        ok += 1;
                    }
                    Err(e) => return (ok, e),
                }
            }
        },
    );
    let (ok, e) = outcome;
    assert!(ok > 0, "read while it lived");
    assert!(
        matches!(
            e,
            TargetError::Unreadable {
                fault: Fault::ProcessGone,
                ..
            } | TargetError::ShortRead {
                fault: Fault::ProcessGone,
                ..
            }
        ),
        "{e}"
    );
    assert!(h.child.wait().unwrap().success());
}

#[test]
fn live_zombie_starter() {
    let Some(mut h) = Hostile::start("exit", &["0"]) else {
        return;
    };
    let pid = h.pid();
    // Not reaped yet: a zombie.
    assert!(wait_for(5, || super::support::status_field(pid, "State:")
        .starts_with('Z')));
    let e = LiveTarget::open(pid, DebugOptions::default()).unwrap_err();
    assert!(e.to_string().contains("zombie"), "{e}");
    let tracer = Tracer::new().unwrap();
    let e = tracer.attach(pid).unwrap_err();
    assert!(e.to_string().contains(&pid.to_string()), "{e}");
    let e = run(
        "attach to a zombie",
        LIVE,
        || (),
        move |()| {
            live::attach(
                pid,
                AcquireOptions::default().with_timeout(Duration::from_secs(5)),
            )
        },
    )
    .unwrap_err();
    assert!(
        matches!(e, AcquireError::Target { .. } | AcquireError::Usage(_)),
        "{e}"
    );
    assert!(h.child.wait().unwrap().success());
}

#[test]
fn live_attach_to_a_starter_with_unreadable_names() {
    let Some(h) = Hostile::start("unterminated", &[]) else {
        return;
    };
    let pid = h.pid();
    let a = run(
        "live attach, hostile names",
        LIVE,
        || (),
        move |()| {
            live::attach(
                pid,
                AcquireOptions::default().with_timeout(Duration::from_secs(20)),
            )
        },
    )
    .unwrap();
    let job = a.job().clone();
    drop(a);
    // Per-rank problems, a complete job; no rank is on a known host, so none is touched.
    assert_eq!(job.len(), 2);
    assert!(job.ranks().all(|r| r.host.is_none()));
    assert!(
        (0..2).all(|r| job.control(r) == &RankControl::Remote),
        "{job:?}"
    );
    assert_untouched(pid);
    for r in job.ranks() {
        assert_untouched(r.pid as u32);
    }
    assert_eq!(read_int(pid, symbols::BEING_DEBUGGED), 0);
    h.finish();
}
