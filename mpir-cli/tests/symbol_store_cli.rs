//! The symbol store (`--symbol-cache DIR`, `$MPIR_SYMBOL_CACHE`) on the bundled demo job: a
//! first read writes the answers of its lookups there, by build-id; a second one reads them and
//! prints the same stacks and call sites; an answer planted in a private store file is believed
//! (which proves the second read answered from the store, not from DWARF), one in a file other
//! users could write is not, nor is a store file made from another debug file (another size);
//! a store directory others could write is not used at all, with a warning; `off` writes
//! nothing. Unnamed, the store is the home's cache (`~/.cache/mpir/symbols`), made private,
//! refused silently (the reason at `-v`) when others may write it, and never made in a home
//! that is not this user's. Every read leaves the job running untraced.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use mpir_target::testkit::{assert_untouched, scratch};
use serde_json::Value;

#[path = "common/demo_paths.rs"]
mod demo_paths;
use demo_paths::demo;

mod common;
use common::mpir;

/// `mpir stacks --json` of the demo job's starter with the store `store`: its merged tree.
fn stacks(starter: &str, store: &str) -> Vec<(String, String, String, String)> {
    let out = mpir()
        .args([
            "stacks",
            "--json",
            "--starter",
            starter,
            "--symbol-cache",
            store,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    tree(&common::json_doc(&out))
}

/// `mpir deadlock --json` of the demo job's starter with the store `store` (`-v` added): the
/// source locations of its ranks' MPI call sites (from DWARF, or from the store), sorted, and
/// its stderr.
fn call_sites(starter: &str, store: &str, verbose: bool) -> (Vec<String>, String) {
    let mut cmd = mpir();
    cmd.args([
        "deadlock",
        "--json",
        "--starter",
        starter,
        "--symbol-cache",
        store,
    ]);
    if verbose {
        cmd.arg("-v");
    }
    let out = cmd.output().unwrap();
    // 3: the demo job's cycle was found.
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let mut found = Vec::new();
    locations(&common::json_doc(&out), &mut found);
    found.sort();
    assert!(!found.is_empty(), "no call site has a source location");
    (found, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Every `location` object's `file:line` under `v`.
fn locations(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "location"
                    && let (Some(f), Some(l)) = (x["file"].as_str(), x["line"].as_u64())
                {
                    out.push(format!("{f}:{l}"));
                }
                locations(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| locations(x, out)),
        _ => {}
    }
}

/// The merged tree as (function, file, line, ranks) per node, in order.
fn tree(doc: &Value) -> Vec<(String, String, String, String)> {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["function"].to_string(),
                n["file"].to_string(),
                n["line"].to_string(),
                n["ranks"].to_string(),
            )
        })
        .collect()
}

fn files(dir: &Path, ending: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(ending))
        .collect();
    v.sort();
    v
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn set_mode(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `bytes` with every `from` replaced by `to` (the same length, so that a store file stays
/// well formed).
fn replaced(bytes: &[u8], from: &[u8], to: &[u8]) -> (Vec<u8>, usize) {
    assert_eq!(from.len(), to.len());
    let mut out = bytes.to_vec();
    let mut n = 0;
    let mut i = 0;
    while i + from.len() <= out.len() {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            n += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    (out, n)
}

#[test]
fn a_second_read_answers_from_the_store_and_only_a_trusted_matching_store_is_believed() {
    let demo = demo(4);
    let starter = demo.starter.id().to_string();
    let scratch = scratch("symbol-store");
    let dir = scratch.join("store");
    let store = dir.to_str().unwrap();

    // Cold: the store is made private, and the demo rank's answers (it is built with DWARF:
    // its call sites name demo/rank.c) are written by build-id.
    let cold_stacks = stacks(&starter, store);
    let (cold, _) = call_sites(&starter, store, false);
    assert!(cold.iter().all(|l| l.contains("rank.c:")), "{cold:?}");
    assert_eq!(mode(&dir), 0o700);
    let frames = files(&dir, ".frames");
    assert!(!frames.is_empty(), "no .frames file in {}", dir.display());
    for f in std::fs::read_dir(&dir).unwrap() {
        let f = f.unwrap().path();
        assert_eq!(mode(&f), 0o600, "{}", f.display());
        assert!(
            !f.to_string_lossy().ends_with(".tmp"),
            "left behind: {}",
            f.display()
        );
    }
    let rank_file = frames
        .iter()
        .find(|f| {
            let b = std::fs::read(f).unwrap();
            b.windows(6).any(|w| w == b"rank.c")
        })
        .unwrap_or_else(|| panic!("no frames file names rank.c: {frames:?}"))
        .clone();

    // Warm: the same stacks and call sites.
    assert_eq!(stacks(&starter, store), cold_stacks);
    let before = std::fs::read(&rank_file).unwrap();
    let (warm, _) = call_sites(&starter, store, false);
    assert_eq!(warm, cold);

    // A private file is believed: an answer changed in it shows, so the reads above came
    // from the store and not from DWARF.
    let (planted, n) = replaced(&before, b"rank.c", b"RANK.C");
    assert!(n > 0);
    std::fs::write(&rank_file, &planted).unwrap();
    let (believed, _) = call_sites(&starter, store, false);
    assert!(
        believed.iter().all(|l| l.contains("RANK.C:")),
        "{believed:?}"
    );

    // The same file writable by others is not used (-v says why), and the answers are right.
    set_mode(&rank_file, 0o666);
    let (refused, err) = call_sites(&starter, store, true);
    assert_eq!(refused, cold);
    assert!(err.contains("writable by group or others"), "{err}");

    // Made from another debug file (its recorded DWARF file size differs): not used either,
    // and rewritten from DWARF.
    let id_len = usize::from(planted[8]);
    let mut other = planted.clone();
    other[9 + id_len] ^= 1; // the DWARF file's size, first byte
    std::fs::write(&rank_file, &other).unwrap();
    set_mode(&rank_file, 0o600);
    let (stale, _) = call_sites(&starter, store, false);
    assert_eq!(stale, cold);
    let (again, _) = call_sites(&starter, store, false);
    assert_eq!(again, cold, "the rewritten file holds DWARF's answers");

    // Garbage in a store file: refused whole, with where; the answers are right.
    std::fs::write(&rank_file, b"MPIRFRM1\x14garbage").unwrap();
    let (garbage, err) = call_sites(&starter, store, true);
    assert_eq!(garbage, cold);
    assert!(err.contains("cut short at byte 9"), "{err}");

    // A store directory others could write: not used at all, said on stderr, nothing written.
    let open = scratch.join("open");
    std::fs::create_dir(&open).unwrap();
    set_mode(&open, 0o777);
    let (unsafe_dir, err) = call_sites(&starter, open.to_str().unwrap(), false);
    assert_eq!(unsafe_dir, cold);
    assert!(
        err.contains("writable by group or others; not used"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);

    // Off: nothing written anywhere, the same answers.
    let (off, _) = call_sites(&starter, "off", false);
    assert_eq!(off, cold);

    // No place named (no flag, no variable): the store is made in the home's cache, private;
    // the same answers, nothing said.
    let default_read = |home: &Path, verbose: bool| {
        let mut cmd = mpir();
        if verbose {
            cmd.arg("-v");
        }
        let out = cmd
            .args(["deadlock", "--json", "--starter", &starter])
            .env("HOME", home)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("MPIR_SYMBOL_CACHE")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(3), "{out:?}");
        let mut found = Vec::new();
        locations(&common::json_doc(&out), &mut found);
        found.sort();
        (found, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let home = scratch.join("home");
    std::fs::create_dir(&home).unwrap();
    let (found, err) = default_read(&home, false);
    assert_eq!(found, cold);
    assert!(!err.contains("symbol store"), "{err}");
    let made = home.join(".cache/mpir/symbols");
    let meta = std::fs::metadata(&made).expect("the default store was made");
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    assert!(
        std::fs::read_dir(&made).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".frames")),
        "the default store holds the stacks' frames"
    );
    // The default place refused (others may write it): nothing said without -v, the reason
    // with it; the same answers, nothing written there.
    let before = std::fs::read_dir(&made).unwrap().count();
    std::fs::set_permissions(&made, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (found, err) = default_read(&home, false);
    assert_eq!(found, cold);
    assert!(!err.contains("symbol store"), "{err}");
    let (found, err) = default_read(&home, true);
    assert_eq!(found, cold);
    assert!(err.contains("writable by group or others"), "{err}");
    assert!(!err.contains("warning"), "{err}");
    assert_eq!(std::fs::read_dir(&made).unwrap().count(), before);
    // A home that is not this user's (a root tool run with someone's HOME): nothing made
    // there, nothing said.
    let theirs = scratch.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    if nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None).is_ok() {
        let (found, err) = default_read(&theirs, false);
        assert_eq!(found, cold);
        assert!(!err.contains("symbol store"), "{err}");
        assert!(
            !theirs.join(".cache").exists(),
            "a store was made in another user's home"
        );
    } else {
        eprintln!("skip: not root, no directory of another user's to test with");
    }
    // No home at all: no store, the same answers.
    let (found, err) = default_read(&scratch.join("no-home"), false);
    assert_eq!(found, cold);
    assert!(!err.contains("symbol store"), "{err}");
    assert!(!scratch.join("no-home").exists());

    std::thread::sleep(std::time::Duration::from_millis(100));
    for pid in demo.ranks.iter().copied().chain([demo.starter.id()]) {
        assert_untouched(pid);
    }
}
