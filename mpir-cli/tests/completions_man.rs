//! `mpir completions SHELL` and `mpir man [SUBCOMMAND]`: generated from the clap definition at
//! run time, so they cannot fall out of date with the binary; these tests check that they are
//! generated and cover every subcommand (the list below is the tool's documented surface,
//! written by hand: a subcommand added without completions would show here).

mod common;
use common::mpir;

const SUBCOMMANDS: [&str; 9] = [
    "launch",
    "attach",
    "core",
    "queues",
    "deadlock",
    "stacks",
    "demo",
    "completions",
    "man",
];

fn stdout(args: &[&str]) -> String {
    let out = mpir().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "mpir {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_shell_completes_every_subcommand_and_their_options() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout(&["completions", shell]);
        for sub in SUBCOMMANDS {
            assert!(script.contains(sub), "{shell}: no {sub}");
        }
        // Options of subcommands too, not only the names.
        for opt in ["engine", "samples", "this-node", "in-process"] {
            assert!(script.contains(opt), "{shell}: no --{opt}");
        }
    }
    let out = mpir().args(["completions", "tcsh"]).output().unwrap();
    assert!(!out.status.success(), "an unknown shell is an error");
}

#[test]
fn the_man_page_lists_every_subcommand_and_each_has_its_page() {
    let page = stdout(&["man"]);
    assert!(page.contains(".TH mpir 1"), "{page}");
    for sub in SUBCOMMANDS {
        // roff escapes the hyphen.
        assert!(
            page.contains(&format!("mpir\\-{sub}(1)")),
            "no {sub} in {page}"
        );
        let sub_page = stdout(&["man", sub]);
        assert!(
            sub_page.contains(&format!(".TH mpir-{sub} 1")),
            "{sub}: {sub_page}"
        );
        assert!(sub_page.contains(".SH OPTIONS"), "{sub}: {sub_page}");
    }
    // A subcommand's page has its own options.
    assert!(stdout(&["man", "deadlock"]).contains("\\-\\-samples"));
    assert!(stdout(&["man", "stacks"]).contains("\\-\\-folded"));
    let out = mpir().args(["man", "nope"]).output().unwrap();
    assert!(!out.status.success());
}

/// An error is one line with its causes, and the hint its type calls for.
#[test]
fn a_demo_dir_without_the_programs_is_one_line_with_a_hint() {
    let out = mpir()
        .args(["demo"])
        .env("MPIR_DEMO_DIR", "/nonexistent/mpir-demo")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("mpir: error: the demo job's starter is not at /nonexistent/mpir-demo/"),
        "{err}"
    );
    assert!(err.contains("(hint: unset MPIR_DEMO_DIR)"), "{err}");
}
