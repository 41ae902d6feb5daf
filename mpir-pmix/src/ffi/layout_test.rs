//! The struct layouts of `types.rs` against the real headers: a C probe compiled now, with
//! Debian's `libpmix-dev` headers (or `MPIR_PMIX_INCLUDE`), prints `sizeof`/`offsetof` of every
//! type and field this crate declares, and each is compared with Rust's `size_of`/`offset_of!`.
//! Also the constants: a wrong status code or key would be silently ignored by a server.

use super::types::*;
use std::mem::{offset_of, size_of};

const PROBE: &str = r#"
#include <pmix_tool.h>
#include <stddef.h>
#include <stdio.h>
#define S(t) printf("size %s %zu\n", #t, sizeof(t));
#define O(t, f) printf("off %s.%s %zu\n", #t, #f, offsetof(t, f));
#define C(n) printf("const %s %ld\n", #n, (long)(n));
#define K(n) printf("key %s %s\n", #n, n);
int main(void) {
    S(pmix_proc_t) O(pmix_proc_t, nspace) O(pmix_proc_t, rank)
    S(pmix_value_t) O(pmix_value_t, type) O(pmix_value_t, data)
    S(pmix_info_t) O(pmix_info_t, key) O(pmix_info_t, flags) O(pmix_info_t, value)
    S(pmix_data_array_t) O(pmix_data_array_t, type) O(pmix_data_array_t, size) O(pmix_data_array_t, array)
    S(pmix_query_t) O(pmix_query_t, keys) O(pmix_query_t, qualifiers) O(pmix_query_t, nqual)
    S(pmix_proc_info_t) O(pmix_proc_info_t, proc) O(pmix_proc_info_t, hostname)
    O(pmix_proc_info_t, executable_name) O(pmix_proc_info_t, pid) O(pmix_proc_info_t, exit_code)
    O(pmix_proc_info_t, state)
    S(pmix_app_t) O(pmix_app_t, cmd) O(pmix_app_t, argv) O(pmix_app_t, env) O(pmix_app_t, cwd)
    O(pmix_app_t, maxprocs) O(pmix_app_t, info) O(pmix_app_t, ninfo)
    C(PMIX_MAX_NSLEN) C(PMIX_MAX_KEYLEN) C(PMIX_RANK_WILDCARD) C(PMIX_SUCCESS)
    C(PMIX_DEBUGGER_RELEASE) C(PMIX_ERR_UNREACH) C(PMIX_READY_FOR_DEBUG)
    C(PMIX_ERR_LOST_CONNECTION) C(PMIX_ERR_LOST_CONNECTION_TO_SERVER) C(PMIX_EVENT_JOB_END)
    C(PMIX_BOOL) C(PMIX_STRING) C(PMIX_PID) C(PMIX_INT) C(PMIX_INT32) C(PMIX_UINT16)
    C(PMIX_UINT32) C(PMIX_STATUS) C(PMIX_PROC) C(PMIX_PROC_INFO) C(PMIX_DATA_ARRAY)
    C(PMIX_RANGE_CUSTOM) C(PMIX_OPERATION_SUCCEEDED) C(PMIX_EVENT_ACTION_COMPLETE)
    K(PMIX_TOOL_ATTACHMENT_FILE)
    K(PMIX_CONNECT_MAX_RETRIES) K(PMIX_CONNECT_RETRY_DELAY) K(PMIX_QUERY_NAMESPACES)
    K(PMIX_QUERY_PROC_TABLE) K(PMIX_NSPACE) K(PMIX_EVENT_CUSTOM_RANGE) K(PMIX_EVENT_NON_DEFAULT)
    K(PMIX_EVENT_AFFECTED_PROC) K(PMIX_JOB_TERM_STATUS) K(PMIX_EXIT_CODE) K(PMIX_DEBUGGER_DAEMONS)
    K(PMIX_DEBUG_TARGET) K(PMIX_DEBUG_DAEMONS_PER_NODE) K(PMIX_FWD_STDOUT) K(PMIX_FWD_STDERR)
    STATES
    return 0;
}
"#;

fn probe() -> Option<std::collections::HashMap<String, String>> {
    let include = std::env::var("MPIR_PMIX_INCLUDE")
        .unwrap_or_else(|_| "/usr/lib/x86_64-linux-gnu/pmix2/include".into());
    if !std::path::Path::new(&include).join("pmix_tool.h").is_file() {
        let reason = format!("no pmix_tool.h in {include} (apt-get install libpmix-dev)");
        if std::env::var("MPIR_REQUIRE_PEERS").as_deref() == Ok("1") {
            panic!("required by MPIR_REQUIRE_PEERS=1: {reason}");
        }
        eprintln!("SKIPPED: {reason}");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("mpir-pmix-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("probe.c"), dir.join("probe"));
    let states: String = PROC_STATES
        .iter()
        .map(|(_, n, _)| format!("C({n}) "))
        .collect();
    std::fs::write(&src, PROBE.replace("STATES", &states)).unwrap();
    let cc = std::process::Command::new("cc")
        .arg(format!("-I{include}"))
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(
        cc.status.success(),
        "probe does not compile: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = std::process::Command::new(&exe)
        .output()
        .expect("run probe");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.lines()
            .filter_map(|l| {
                let mut w = l.splitn(3, ' ');
                let (kind, name, v) = (w.next()?, w.next()?, w.next()?);
                Some((format!("{kind} {name}"), v.to_string()))
            })
            .collect(),
    )
}

#[test]
fn layouts_and_constants_match_the_headers() {
    let Some(c) = probe() else { return };
    let mut bad = Vec::new();
    let mut checked = std::collections::HashSet::new();
    let mut check = |what: &str, rust: String| {
        checked.insert(what.to_string());
        match c.get(what) {
            Some(v) if *v == rust => {}
            other => bad.push(format!("{what}: C {other:?}, Rust {rust}")),
        }
    };
    macro_rules! size {
        ($c:literal, $t:ty) => {
            check(concat!("size ", $c), size_of::<$t>().to_string())
        };
    }
    macro_rules! off {
        ($c:literal, $t:ty, $f:ident) => {
            check(concat!("off ", $c), offset_of!($t, $f).to_string())
        };
    }
    size!("pmix_proc_t", PmixProc);
    off!("pmix_proc_t.nspace", PmixProc, nspace);
    off!("pmix_proc_t.rank", PmixProc, rank);
    size!("pmix_value_t", PmixValue);
    off!("pmix_value_t.type", PmixValue, type_);
    off!("pmix_value_t.data", PmixValue, data);
    size!("pmix_info_t", PmixInfo);
    off!("pmix_info_t.key", PmixInfo, key);
    off!("pmix_info_t.flags", PmixInfo, flags);
    off!("pmix_info_t.value", PmixInfo, value);
    size!("pmix_data_array_t", PmixDataArray);
    off!("pmix_data_array_t.type", PmixDataArray, type_);
    off!("pmix_data_array_t.size", PmixDataArray, size);
    off!("pmix_data_array_t.array", PmixDataArray, array);
    size!("pmix_query_t", PmixQuery);
    off!("pmix_query_t.keys", PmixQuery, keys);
    off!("pmix_query_t.qualifiers", PmixQuery, qualifiers);
    off!("pmix_query_t.nqual", PmixQuery, nqual);
    size!("pmix_proc_info_t", PmixProcInfo);
    off!("pmix_proc_info_t.proc", PmixProcInfo, proc_);
    off!("pmix_proc_info_t.hostname", PmixProcInfo, hostname);
    off!(
        "pmix_proc_info_t.executable_name",
        PmixProcInfo,
        executable_name
    );
    off!("pmix_proc_info_t.pid", PmixProcInfo, pid);
    off!("pmix_proc_info_t.exit_code", PmixProcInfo, exit_code);
    off!("pmix_proc_info_t.state", PmixProcInfo, state);
    size!("pmix_app_t", PmixApp);
    off!("pmix_app_t.cmd", PmixApp, cmd);
    off!("pmix_app_t.argv", PmixApp, argv);
    off!("pmix_app_t.env", PmixApp, env);
    off!("pmix_app_t.cwd", PmixApp, cwd);
    off!("pmix_app_t.maxprocs", PmixApp, maxprocs);
    off!("pmix_app_t.info", PmixApp, info);
    off!("pmix_app_t.ninfo", PmixApp, ninfo);
    let consts: &[(&str, i64)] = &[
        ("PMIX_MAX_NSLEN", MAX_NSLEN as i64),
        ("PMIX_MAX_KEYLEN", MAX_KEYLEN as i64),
        ("PMIX_RANK_WILDCARD", i64::from(RANK_WILDCARD)),
        ("PMIX_SUCCESS", i64::from(PMIX_SUCCESS)),
        ("PMIX_DEBUGGER_RELEASE", i64::from(PMIX_DEBUGGER_RELEASE)),
        ("PMIX_ERR_UNREACH", i64::from(PMIX_ERR_UNREACH)),
        ("PMIX_READY_FOR_DEBUG", i64::from(PMIX_READY_FOR_DEBUG)),
        (
            "PMIX_ERR_LOST_CONNECTION",
            i64::from(PMIX_ERR_LOST_CONNECTION),
        ),
        (
            "PMIX_ERR_LOST_CONNECTION_TO_SERVER",
            i64::from(PMIX_ERR_LOST_CONNECTION_TO_SERVER),
        ),
        ("PMIX_EVENT_JOB_END", i64::from(PMIX_EVENT_JOB_END)),
        ("PMIX_BOOL", i64::from(PMIX_BOOL)),
        ("PMIX_STRING", i64::from(PMIX_STRING)),
        ("PMIX_PID", i64::from(PMIX_PID)),
        ("PMIX_INT", i64::from(PMIX_INT)),
        ("PMIX_INT32", i64::from(PMIX_INT32)),
        ("PMIX_UINT16", i64::from(PMIX_UINT16)),
        ("PMIX_UINT32", i64::from(PMIX_UINT32)),
        ("PMIX_STATUS", i64::from(PMIX_STATUS)),
        ("PMIX_PROC", i64::from(PMIX_PROC)),
        ("PMIX_PROC_INFO", i64::from(PMIX_PROC_INFO)),
        ("PMIX_DATA_ARRAY", i64::from(PMIX_DATA_ARRAY)),
        ("PMIX_RANGE_CUSTOM", i64::from(PMIX_RANGE_CUSTOM)),
        (
            "PMIX_OPERATION_SUCCEEDED",
            i64::from(PMIX_OPERATION_SUCCEEDED),
        ),
        (
            "PMIX_EVENT_ACTION_COMPLETE",
            i64::from(PMIX_EVENT_ACTION_COMPLETE),
        ),
    ];
    for (v, n, _) in PROC_STATES {
        check(&format!("const {n}"), v.to_string());
    }
    for (n, v) in consts {
        check(&format!("const {n}"), v.to_string());
    }
    let ks: &[(&str, &str)] = &[
        ("PMIX_TOOL_ATTACHMENT_FILE", keys::TOOL_ATTACHMENT_FILE),
        ("PMIX_CONNECT_MAX_RETRIES", keys::CONNECT_MAX_RETRIES),
        ("PMIX_CONNECT_RETRY_DELAY", keys::CONNECT_RETRY_DELAY),
        ("PMIX_QUERY_NAMESPACES", keys::QUERY_NAMESPACES),
        ("PMIX_QUERY_PROC_TABLE", keys::QUERY_PROC_TABLE),
        ("PMIX_NSPACE", keys::NSPACE),
        ("PMIX_EVENT_CUSTOM_RANGE", keys::EVENT_CUSTOM_RANGE),
        ("PMIX_EVENT_NON_DEFAULT", keys::EVENT_NON_DEFAULT),
        ("PMIX_EVENT_AFFECTED_PROC", keys::EVENT_AFFECTED_PROC),
        ("PMIX_JOB_TERM_STATUS", keys::JOB_TERM_STATUS),
        ("PMIX_EXIT_CODE", keys::EXIT_CODE),
        ("PMIX_DEBUGGER_DAEMONS", keys::DEBUGGER_DAEMONS),
        ("PMIX_DEBUG_TARGET", keys::DEBUG_TARGET),
        ("PMIX_DEBUG_DAEMONS_PER_NODE", keys::DEBUG_DAEMONS_PER_NODE),
        ("PMIX_FWD_STDOUT", keys::FWD_STDOUT),
        ("PMIX_FWD_STDERR", keys::FWD_STDERR),
    ];
    for (n, v) in ks {
        check(&format!("key {n}"), (*v).to_string());
    }
    assert!(
        bad.is_empty(),
        "layouts differ from the headers:\n{}",
        bad.join("\n")
    );
    let unchecked: Vec<&String> = c.keys().filter(|k| !checked.contains(*k)).collect();
    assert!(
        unchecked.is_empty(),
        "the probe printed what is not compared: {unchecked:?}"
    );
}
