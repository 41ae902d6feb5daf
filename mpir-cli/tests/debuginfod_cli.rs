//! `--debuginfod` / `--no-debuginfod` reach the debug-file search: `mpir attach` on a stripped
//! program (not a starter) asks the server of `DEBUGINFOD_URLS` for its debug file by build-id,
//! and asks nothing under `--no-debuginfod`. The server is a fake on 127.0.0.1 that records the
//! requests and answers 404.

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use common::mpir;
use mpir_target::debuginfo::ElfFile;
use mpir_target::testkit::{have, run, scratch, skip};

/// Answers 404 to every request, recording its path; stops after `limit` connections or when
/// the test ends (the thread is detached and blocks only in `accept`).
fn recording_server(limit: usize) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    std::thread::spawn(move || {
        for conn in listener.incoming().take(limit) {
            let Ok(mut s) = conn else { continue };
            let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(5)));
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
                match s.read(&mut b) {
                    Ok(1) => head.push(b[0]),
                    _ => break,
                }
            }
            let line = String::from_utf8_lossy(&head).into_owned();
            if let Some(path) = line.split_whitespace().nth(1) {
                record.lock().unwrap().push(path.to_string());
            }
            let _ = s.write_all(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    (url, seen)
}

/// A stripped program with a build-id of its own (its source names the scratch directory).
fn stripped_program(dir: &Path) -> Result<std::path::PathBuf, String> {
    let src = dir.join("stripped.c");
    std::fs::write(
        &src,
        format!(
            "#include <unistd.h>\nconst char *tag = \"{}\";\nint main(void) {{ pause(); return 0; }}\n",
            dir.display()
        ),
    )
    .map_err(|e| e.to_string())?;
    let exe = dir.join("stripped");
    run(Command::new("cc")
        .args(["-O1", "-s", "-Wl,--build-id"])
        .arg(&src)
        .arg("-o")
        .arg(&exe))?;
    Ok(exe)
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_switch_decides_whether_debuginfod_is_asked() {
    if !have("cc") {
        return skip("no C compiler (cc)");
    }
    let dir = scratch("cli-debuginfod");
    let exe = stripped_program(&dir).unwrap();
    let id = hex(ElfFile::open(&exe).unwrap().build_id().unwrap());
    let mut child = Command::new(&exe)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let (url, seen) = recording_server(256);
    let attach = |flag: Option<&str>, cache: &str| {
        let mut cmd = mpir();
        cmd.args(flag)
            .args(["attach", "--timeout", "5", &pid])
            .env("DEBUGINFOD_URLS", &url)
            .env("DEBUGINFOD_CACHE_PATH", dir.join(cache))
            .env("DEBUGINFOD_TIMEOUT", "5");
        cmd.output().unwrap()
    };
    let wanted = format!("/buildid/{id}/debuginfo");

    // By the variable: the program's debug file is asked for; it is not a starter.
    let out = attach(None, "c1");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not an MPIR starter"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        seen.lock().unwrap().contains(&wanted),
        "{wanted} not among {:?}",
        seen.lock().unwrap()
    );

    // Switched off: nothing asked, whatever the variable says.
    seen.lock().unwrap().clear();
    let out = attach(Some("--no-debuginfod"), "c2");
    assert!(!out.status.success());
    assert_eq!(*seen.lock().unwrap(), Vec::<String>::new());

    // Switched on explicitly (after --no-debuginfod, the last one wins).
    let out = {
        let mut cmd = mpir();
        cmd.args([
            "--no-debuginfod",
            "attach",
            "--debuginfod",
            "--timeout",
            "5",
            &pid,
        ])
        .env("DEBUGINFOD_URLS", &url)
        .env("DEBUGINFOD_CACHE_PATH", dir.join("c3"));
        cmd.output().unwrap()
    };
    assert!(!out.status.success());
    assert!(seen.lock().unwrap().contains(&wanted));

    // --debuginfod with no server named says so.
    let out = mpir()
        .args(["--debuginfod", "attach", "--timeout", "5", &pid])
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("DEBUGINFOD_URLS names no server"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = child.kill();
    let _ = child.wait();
}
