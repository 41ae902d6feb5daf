//! Each CPython version's own headers as the oracle for `mpir_target::python::layout`: the probe
//! `tests/fixtures/python_layout_probe.c` is compiled with gcc against the installed headers of
//! every pyenv CPython 3.9 to 3.13 (`$PYENV_ROOT/versions/3.M.P`, `~/.pyenv` by default) and of
//! the system's (`/usr/include/python3.M`, when present), run, and every `key=value` it prints
//! must equal the same key of `for_minor(M)`'s `fields()`.
//!
//! A pyenv minor version without installed headers (or no gcc) skips with a reason, except
//! under `MPIR_REQUIRE_PEERS=1`, where it fails. System headers are checked only when present.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use mpir_target::python::layout::for_minor;
use mpir_target::testkit::{have, run, scratch, skip};

const MINORS: std::ops::RangeInclusive<u8> = 9..=13;

/// One set of headers to check: a label for messages, the minor version, the include dir.
struct Headers {
    label: String,
    minor: u8,
    include: PathBuf,
}

fn probe_source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/python_layout_probe.c")
}

fn pyenv_versions() -> Option<PathBuf> {
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".pyenv")))?;
    Some(root.join("versions"))
}

/// The pyenv installs `3.<minor>.<patch>` (release builds by name: no `t`, no `-dev`).
fn pyenv_installs(versions: &Path, minor: u8) -> Vec<(String, PathBuf)> {
    let prefix = format!("3.{minor}.");
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(versions)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let patch = name.strip_prefix(&prefix)?;
            (!patch.is_empty() && patch.bytes().all(|b| b.is_ascii_digit()))
                .then(|| (name, entry.path()))
        })
        .collect();
    found.sort();
    found
}

/// Every set of headers to check; a pyenv minor version without headers is skipped (or fails
/// under `MPIR_REQUIRE_PEERS=1`).
fn headers() -> Vec<Headers> {
    let mut all = Vec::new();
    let versions = pyenv_versions();
    for minor in MINORS {
        let installs = versions
            .as_deref()
            .map(|v| pyenv_installs(v, minor))
            .unwrap_or_default();
        if installs.is_empty() {
            skip(&format!(
                "CPython 3.{minor}: no pyenv install 3.{minor}.* in {}",
                versions
                    .as_deref()
                    .map_or("$PYENV_ROOT/versions".into(), |v| v.display().to_string())
            ));
            continue;
        }
        for (name, dir) in installs {
            let include = dir.join(format!("include/python3.{minor}"));
            if include.join("internal").is_dir() {
                all.push(Headers {
                    label: format!("pyenv {name}"),
                    minor,
                    include,
                });
            } else {
                skip(&format!(
                    "pyenv {name}: no internal headers at {}/internal",
                    include.display()
                ));
            }
        }
    }
    for minor in MINORS {
        let include = PathBuf::from(format!("/usr/include/python3.{minor}"));
        if include.join("internal").is_dir() {
            all.push(Headers {
                label: format!("system {}", include.display()),
                minor,
                include,
            });
        }
    }
    all
}

/// Compiles the probe against `h` in `dir` and runs it: its `key=value` lines, `-` as `None`.
fn probe(h: &Headers, dir: &Path) -> BTreeMap<String, Option<u64>> {
    let exe = dir.join(format!("probe-3.{}", h.minor));
    let inc = h.include.display();
    if let Err(e) = run(Command::new("gcc")
        .arg(format!("-I{inc}"))
        .arg(format!("-I{inc}/internal"))
        .args(["-DPy_BUILD_CORE", "-DPy_BUILD_CORE_MODULE"])
        .arg(probe_source())
        .arg("-o")
        .arg(&exe))
    {
        panic!("{}: the probe does not compile: {e}", h.label);
    }
    let out = run(&mut Command::new(&exe))
        .unwrap_or_else(|e| panic!("{}: the probe failed: {e}", h.label));
    let mut values = BTreeMap::new();
    for line in out.lines() {
        let (key, value) = line
            .split_once('=')
            .unwrap_or_else(|| panic!("{}: not key=value: {line:?}", h.label));
        let value = match value {
            "-" => None,
            v => Some(
                v.parse::<u64>()
                    .unwrap_or_else(|e| panic!("{}: {key}={v}: {e}", h.label)),
            ),
        };
        if values.insert(key.to_string(), value).is_some() {
            panic!("{}: the probe printed {key} twice", h.label);
        }
    }
    values
}

fn show(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

#[test]
fn layouts_match_each_versions_headers() {
    if !have("gcc") {
        return skip("no gcc on PATH to compile the CPython layout probe");
    }
    let dir = scratch("python-layouts");
    let mut checked = Vec::new();
    let mut wrong = Vec::new();
    for h in headers() {
        let got = probe(&h, &dir);
        let Some(layout) = for_minor(h.minor) else {
            panic!("{}: no layout for 3.{}", h.label, h.minor);
        };
        assert_eq!(
            got.get("minor").copied().flatten(),
            Some(u64::from(h.minor)),
            "{}: the headers are not those of 3.{}",
            h.label,
            h.minor
        );
        let expected: BTreeMap<&str, Option<u64>> = layout.fields().into_iter().collect();
        for (key, want) in &expected {
            match got.get(*key) {
                None => wrong.push(format!("{}: {key}: the probe does not print it", h.label)),
                Some(value) if value != want => wrong.push(format!(
                    "{}: {key}: headers say {}, layout 3.{} says {}",
                    h.label,
                    show(*value),
                    h.minor,
                    show(*want)
                )),
                Some(_) => {}
            }
        }
        for key in got.keys() {
            if !expected.contains_key(key.as_str()) {
                wrong.push(format!("{}: {key}: not among the layout's fields", h.label));
            }
        }
        checked.push(h.label);
    }
    assert!(wrong.is_empty(), "layout mismatches:\n{}", wrong.join("\n"));
    if checked.is_empty() {
        return skip("no CPython 3.9–3.13 headers found: no layout was checked");
    }
    eprintln!("checked: {}", checked.join(", "));
}
