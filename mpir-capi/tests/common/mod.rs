//! What the C-side tests share: the library as cargo built it for these tests, C and C++
//! compilers, running a program with a time limit.

#![allow(dead_code, unreachable_pub)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mpir_target::testkit::{Scratch, have, scratch, skip};

/// The crate's directory (the header is in `include/`, the examples in `examples/`).
pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory holding this test's build of the library: libmpir.so and libmpir.a, built
/// with the rlib the test binary links. Cargo writes them next to the test binary, in
/// `target/<profile>/deps` (a crate with a cdylib has no hash in its file names), and copies
/// them up to `target/<profile>` only when it builds them.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe
        .parent()
        .expect("the test binary is in target/<profile>/deps");
    let has_both = |d: &Path| {
        ["libmpir.so", "libmpir.a"]
            .iter()
            .all(|l| d.join(l).is_file())
    };
    [Some(deps), deps.parent()]
        .into_iter()
        .flatten()
        .find(|d| has_both(d))
        .unwrap_or_else(|| {
            panic!(
                "libmpir.so and libmpir.a are not in {}: cargo builds them with the tests",
                deps.display()
            )
        })
        .to_path_buf()
}

/// A scratch directory where `libmpir.so.0` (the soname) and `libmpir.so` (for `-lmpir`) name
/// this build of the library.
pub struct Lib {
    pub dir: Scratch,
    pub static_lib: PathBuf,
}

pub fn lib(name: &str) -> Lib {
    let target = target_dir();
    let dir = scratch(name);
    for link in ["libmpir.so.0", "libmpir.so"] {
        std::os::unix::fs::symlink(target.join("libmpir.so"), dir.join(link)).unwrap();
    }
    Lib {
        dir,
        static_lib: target.join("libmpir.a"),
    }
}

/// The system libraries a static libmpir needs on Linux (`--print native-static-libs`).
pub const STATIC_DEPS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// Whether `tool` is on the PATH; skips (or, under MPIR_REQUIRE_PEERS=1, fails) otherwise.
pub fn need(tool: &str) -> bool {
    if have(tool) {
        return true;
    }
    skip(&format!("{tool} is not installed"));
    false
}

/// Compiles with `compiler` and `args` (the header's directory on the include path); panics
/// with the compiler's message.
pub fn compile(compiler: &str, args: &[&std::ffi::OsStr]) {
    let out = Command::new(compiler)
        .arg("-I")
        .arg(crate_dir().join("include"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What a program printed and how it ended.
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
}

/// Runs `cmd` to its end, `limit` at most (then it is killed and the test fails).
pub fn run(cmd: &mut Command, limit: Duration) -> Run {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        stdout: reader.join().unwrap(),
        stderr: err_reader.join().unwrap(),
        code: status.code(),
    }
}

/// Whether gcc can link AddressSanitizer programs here (its runtime is installed).
pub fn have_asan() -> bool {
    let Ok(out) = Command::new("gcc")
        .arg("-print-file-name=libasan.so")
        .output()
    else {
        return false;
    };
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Path::new(&path).is_absolute() && Path::new(&path).exists()
}

/// `src` (a C file of this crate, in C standard `std`) compiled under AddressSanitizer and
/// linked with this build's static libmpir, into a scratch directory named `name`: the
/// directory (kept alive by the caller) and the program.
pub fn compile_asan(name: &str, std: &str, src: &Path) -> (Lib, PathBuf) {
    let lib = lib(name);
    let exe = lib.dir.join(name);
    let std = format!("-std={std}");
    let flags = [
        std.as_str(),
        "-g",
        "-fsanitize=address",
        "-fno-omit-frame-pointer",
        "-o",
    ];
    let mut args: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsStr::new).collect();
    args.extend([exe.as_os_str(), src.as_os_str(), lib.static_lib.as_os_str()]);
    args.extend(STATIC_DEPS.iter().map(std::ffi::OsStr::new));
    compile("gcc", &args);
    (lib, exe)
}

/// `src` (a C or C++ file of this crate, standard flag `std`, e.g. `-std=c99`) compiled with
/// `compiler` and warnings as errors, linked against this build's `libmpir.so` (found at run
/// time through an rpath), into a scratch directory named `name`: the directory (kept alive by
/// the caller) and the program.
pub fn compile_dynamic(compiler: &str, name: &str, std: &str, src: &Path) -> (Lib, PathBuf) {
    let lib = lib(name);
    let exe = lib.dir.join(name);
    let rpath = std::ffi::OsString::from(format!("-Wl,-rpath,{}", lib.dir.display()));
    let flags = [std, "-g", "-Wall", "-Wextra", "-Werror", "-o"];
    let mut args: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsStr::new).collect();
    args.extend([
        exe.as_os_str(),
        src.as_os_str(),
        std::ffi::OsStr::new("-L"),
        lib.dir.as_os_str(),
        &rpath,
        std::ffi::OsStr::new("-lmpir"),
        std::ffi::OsStr::new("-lpthread"),
    ]);
    compile(compiler, &args);
    (lib, exe)
}

/// Whether process `pid` is still there (a zombie awaiting its parent counts as gone).
pub fn alive(pid: u32) -> bool {
    mpir_target::live::procfs::ProcessFacts::read(pid).is_ok_and(|f| !f.is_gone())
}

/// Whether every process of `pids` is gone within `secs` seconds.
pub fn gone_within(pids: &[u32], secs: u64) -> bool {
    mpir_target::testkit::wait_for(secs, || !pids.iter().any(|&p| alive(p)))
}
