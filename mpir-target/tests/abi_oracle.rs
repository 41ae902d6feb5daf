//! gdb as the oracle for ABI layouts: the interface structs are compiled with the system C
//! compiler for x86_64 (LP64) and i386 (ILP32, `-m32`), and `gdb -batch -ex 'ptype/o T'` says
//! where each member is. Our `CStructBuilder`-computed layouts must agree exactly.
//!
//! Without a compiler, gdb or 32-bit support this skips with a reason, except when
//! `MPIR_REQUIRE_PEERS=1` (CI), where it fails.

mod support;

use std::path::Path;
use std::process::Command;

use support::{gdb_fields, scratch, skip};

use mpir_types::mpir::ProcDescLayout;
use mpir_types::mqd::{CommunicatorLayout, PendingOperationLayout};
use mpir_types::{DataModel, FieldLayout};

const SOURCE: &str = r#"
typedef struct { char *host_name; char *executable_name; int pid; } MPIR_PROCDESC;
typedef unsigned long mqs_taddr_t;
typedef long mqs_tword_t;
typedef struct {
  mqs_taddr_t unique_id; mqs_tword_t local_rank; mqs_tword_t size; char name[64];
} mqs_communicator;
typedef struct {
  int status;
  mqs_tword_t desired_local_rank;
  mqs_tword_t desired_global_rank;
  int tag_wild;
  mqs_tword_t desired_tag;
  mqs_tword_t desired_length;
  int system_buffer;
  mqs_taddr_t buffer;
  mqs_tword_t actual_local_rank;
  mqs_tword_t actual_global_rank;
  mqs_tword_t actual_tag;
  mqs_tword_t actual_length;
  char extra_text[5][64];
} mqs_pending_operation;
MPIR_PROCDESC d; mqs_communicator c; mqs_pending_operation o;
"#;

fn compile(dir: &Path, flags: &[&str], name: &str) -> Result<std::path::PathBuf, String> {
    let src = dir.join("abi.c");
    std::fs::write(&src, SOURCE).map_err(|e| e.to_string())?;
    let obj = dir.join(name);
    let out = Command::new("cc")
        .args(flags)
        .args(["-g", "-fno-eliminate-unused-debug-types", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .map_err(|e| format!("cannot run cc: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cc {flags:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(obj)
}

fn check(model: DataModel, flags: &[&str], name: &str) {
    let dir = scratch(name);
    let obj = match compile(&dir, flags, name) {
        Ok(o) => o,
        Err(e) => return skip(&e),
    };
    let gdb = match gdb_fields(
        &obj,
        &["MPIR_PROCDESC", "mqs_communicator", "mqs_pending_operation"],
    ) {
        Ok(l) => l,
        Err(e) => return skip(&e),
    };
    let p = ProcDescLayout::abi(&model);
    let c = CommunicatorLayout::abi(&model);
    let o = PendingOperationLayout::abi(&model);
    let ours: [(u64, Vec<(&str, FieldLayout)>); 3] = [
        (
            p.size,
            vec![
                ("host_name", p.host_name),
                ("executable_name", p.executable_name),
                ("pid", p.pid),
            ],
        ),
        (
            c.size,
            vec![
                ("unique_id", c.unique_id),
                ("local_rank", c.local_rank),
                ("size", c.comm_size),
                ("name", c.name),
            ],
        ),
        (
            o.size,
            vec![
                ("status", o.status),
                ("desired_local_rank", o.desired_local_rank),
                ("desired_global_rank", o.desired_global_rank),
                ("tag_wild", o.tag_wild),
                ("desired_tag", o.desired_tag),
                ("desired_length", o.desired_length),
                ("system_buffer", o.system_buffer),
                ("buffer", o.buffer),
                ("actual_local_rank", o.actual_local_rank),
                ("actual_global_rank", o.actual_global_rank),
                ("actual_tag", o.actual_tag),
                ("actual_length", o.actual_length),
                ("extra_text", o.extra_text),
            ],
        ),
    ];
    for ((size, fields), (gdb_size, gdb_fields)) in ours.iter().zip(&gdb) {
        assert_eq!(size, gdb_size, "{model}: struct size");
        assert_eq!(fields.len(), gdb_fields.len(), "{model}: {gdb_fields:?}");
        for (name, f) in fields {
            assert_eq!(Some(f), gdb_fields.get(*name), "{model}: member {name}");
        }
    }
}

#[test]
fn lp64_layouts_match_gcc_and_gdb() {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        return skip("the oracle compiles for x86_64 Linux");
    }
    check(DataModel::LP64, &["-m64"], "abi64.o");
}

#[test]
fn ilp32_layouts_match_gcc_and_gdb() {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        return skip("the oracle compiles for x86_64 Linux");
    }
    check(DataModel::ILP32, &["-m32"], "abi32.o");
}
