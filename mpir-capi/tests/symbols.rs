//! libmpir.so exports exactly the header's functions, each with version `MPIR_0.1`, and its
//! soname is `libmpir.so.0`; libmpir.a defines the same functions. Read with binutils'
//! `readelf` and `nm`, not with our own ELF reader.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::collections::BTreeSet;
use std::process::Command;

use common::{crate_dir, need, target_dir};

/// The functions the committed header declares.
fn header_functions() -> BTreeSet<String> {
    let text = std::fs::read_to_string(crate_dir().join("include/mpir.h")).unwrap();
    text.lines()
        .filter(|l| !l.trim_start().starts_with('*') && !l.trim_start().starts_with("/*"))
        .filter_map(|l| {
            let open = l.find('(')?;
            let name = l[..open].rsplit([' ', '*']).next()?;
            name.starts_with("mpir_").then(|| name.to_string())
        })
        .collect()
}

fn tool(cmd: &str, args: &[&str], file: &std::path::Path) -> String {
    let out = Command::new(cmd).args(args).arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn every_exported_symbol_is_a_versioned_mpir_function() {
    if !need("readelf") {
        return;
    }
    let so = target_dir().join("libmpir.so");
    let syms = tool("readelf", &["--dyn-syms", "--wide"], &so);
    let mut exported = BTreeSet::new();
    for line in syms.lines() {
        // Num: Value Size Type Bind Vis Ndx Name
        let f: Vec<&str> = line.split_whitespace().collect();
        let is_row = f
            .first()
            .and_then(|n| n.strip_suffix(':'))
            .is_some_and(|n| n.parse::<u32>().is_ok());
        if !is_row || f.len() < 8 || f[6] == "UND" || f[4] == "LOCAL" {
            continue;
        }
        let name = f[7];
        // The version's own definition symbol, when the linker emits one.
        if f[3] == "OBJECT" && f[6] == "ABS" && name.starts_with("MPIR_0.1") {
            continue;
        }
        let (base, version) = name
            .split_once("@@")
            .unwrap_or_else(|| panic!("{name} is exported without a version:\n{line}"));
        assert_eq!(version, "MPIR_0.1", "{line}");
        assert!(base.starts_with("mpir_"), "{name} leaks from the library");
        assert_eq!(f[3], "FUNC", "{line}");
        exported.insert(base.to_string());
    }
    let declared = header_functions();
    assert!(declared.len() > 20, "{declared:?}");
    assert_eq!(exported, declared, "exported vs declared in mpir.h");

    let dynamic = tool("readelf", &["-d"], &so);
    assert!(
        dynamic.contains("Library soname: [libmpir.so.0]"),
        "{dynamic}"
    );
}

#[test]
fn the_static_library_defines_every_function() {
    if !need("nm") {
        return;
    }
    let a = target_dir().join("libmpir.a");
    let out = tool("nm", &["--defined-only", "--no-sort"], &a);
    let defined: BTreeSet<String> = out
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_addr, kind, name) = (f.next()?, f.next()?, f.next()?);
            (kind == "T").then(|| name.split('@').next().unwrap_or(name).to_string())
        })
        .filter(|n| n.starts_with("mpir_"))
        .collect();
    assert_eq!(defined, header_functions());
}
