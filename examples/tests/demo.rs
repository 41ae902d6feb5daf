//! The mock-data demo (`mock-proctable`), end to end: the decoders in every data model and layout.

use std::process::Command;

fn demo(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mock-proctable"))
        .args(args)
        .output()
        .expect("run the demo");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_model_reads_the_same_job() {
    for (model, size, ptr) in [
        ("lp64", 24, 8),
        ("ilp32", 12, 4),
        ("llp64", 24, 8),
        ("lp64-be", 24, 8),
        ("ilp32-be", 12, 4),
    ] {
        for extra in [&[][..], &["--dwarf"], &["--duplicate-strings"]] {
            let mut args = vec!["--model", model, "-n", "5", "--hosts", "3", "--json"];
            args.extend_from_slice(extra);
            let (ok, out, err) = demo(&args);
            assert!(ok, "{model} {extra:?}: {err}");
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let ranks = v["ranks"].as_array().unwrap();
            assert_eq!(ranks.len(), 5);
            for (i, r) in ranks.iter().enumerate() {
                assert_eq!(r["rank"], i);
                assert_eq!(r["pid"], 4242 + i as i64);
                assert_eq!(r["host"], format!("node{:02}", i % 3));
                assert_eq!(r["executable"], "/opt/demo/bin/ring");
            }
            assert_eq!(v["problems"].as_array().unwrap().len(), 0);
            let layout = &v["layout"];
            if extra == ["--dwarf"] {
                assert_eq!(layout["pid"]["offset"], 0);
                assert_eq!(layout["pid"]["size"], 8);
                assert_eq!(layout["host_name"]["offset"], 8);
                assert!(layout["source"]["debug_info"].is_object(), "{layout}");
            } else {
                assert_eq!(layout["size"], size, "{model}");
                assert_eq!(layout["pid"]["offset"], 2 * ptr);
                assert_eq!(layout["source"], "abi");
            }
        }
    }
}

#[test]
fn table_output_and_errors() {
    let (ok, out, _) = demo(&[]);
    assert!(ok);
    assert!(out.contains("no processes involved"), "{out}");
    assert!(out.contains("ilp32-be"));
    assert_eq!(
        out.lines()
            .filter(|l| l.contains("/opt/demo/bin/ring"))
            .count(),
        8
    );
    let (ok, _, err) = demo(&["--model", "pdp11"]);
    assert!(!ok);
    assert!(err.contains("unknown model \"pdp11\""), "{err}");
}
