//! Unit tests of the options, the cache layout and URL checks.

use super::*;

fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn off_without_servers_on_with_the_variable() {
    let home = [("HOME", "/home/u")];
    assert_eq!(
        DebuginfodOptions::default().client_with_env(env(&home)),
        None
    );
    assert_eq!(
        DebuginfodOptions::enabled().client_with_env(env(&home)),
        None
    );
    let vars = [
        ("HOME", "/home/u"),
        (
            "DEBUGINFOD_URLS",
            "  https://a.example/  http://b.example:8002 ",
        ),
    ];
    let c = DebuginfodOptions::default()
        .client_with_env(env(&vars))
        .unwrap();
    assert_eq!(c.servers(), ["https://a.example", "http://b.example:8002"]);
    assert_eq!(c.cache_dir(), Path::new("/home/u/.cache/debuginfod_client"));
    assert_eq!(
        (c.timeout(), c.max_time(), c.max_size()),
        (DEFAULT_TIMEOUT, DEFAULT_MAX_TIME, DEFAULT_MAX_SIZE)
    );
    // Disabled wins over the environment; explicit servers replace it.
    assert_eq!(
        DebuginfodOptions::disabled().client_with_env(env(&vars)),
        None
    );
    let c = DebuginfodOptions::default()
        .with_url("http://mine:1/")
        .client_with_env(env(&vars))
        .unwrap();
    assert_eq!(c.servers(), ["http://mine:1"]);
}

#[test]
fn the_environment_sets_cache_and_bounds() {
    let vars = [
        ("HOME", "/home/u"),
        ("XDG_CACHE_HOME", "/xdg"),
        ("DEBUGINFOD_URLS", "http://s"),
        ("DEBUGINFOD_TIMEOUT", "7"),
        ("DEBUGINFOD_MAXTIME", "70"),
        ("DEBUGINFOD_MAXSIZE", "1000"),
    ];
    let c = DebuginfodOptions::default()
        .client_with_env(env(&vars))
        .unwrap();
    assert_eq!(c.cache_dir(), Path::new("/xdg/debuginfod_client"));
    assert_eq!(c.timeout(), Duration::from_secs(7));
    assert_eq!(c.max_time(), Duration::from_secs(70));
    assert_eq!(c.max_size(), 1000);
    let mut with_path = vars.to_vec();
    with_path.push(("DEBUGINFOD_CACHE_PATH", "/explicit"));
    let c = DebuginfodOptions::default()
        .client_with_env(env(&with_path))
        .unwrap();
    assert_eq!(c.cache_dir(), Path::new("/explicit"));
    // The options win over the environment; nonsense values fall back to the defaults.
    let c = DebuginfodOptions::default()
        .with_cache_dir("/opt")
        .with_timeout(Duration::from_secs(2))
        .with_max_size(5)
        .client_with_env(env(&vars))
        .unwrap();
    assert_eq!(
        (c.cache_dir(), c.timeout(), c.max_size()),
        (Path::new("/opt"), Duration::from_secs(2), 5)
    );
    let junk = [
        ("HOME", "/h"),
        ("DEBUGINFOD_URLS", "http://s"),
        ("DEBUGINFOD_TIMEOUT", "soon"),
        ("DEBUGINFOD_MAXSIZE", "0"),
    ];
    let c = DebuginfodOptions::default()
        .client_with_env(env(&junk))
        .unwrap();
    assert_eq!(
        (c.timeout(), c.max_size()),
        (DEFAULT_TIMEOUT, DEFAULT_MAX_SIZE)
    );
    // No cache directory at all: off.
    assert_eq!(
        DebuginfodOptions::default().client_with_env(env(&[("DEBUGINFOD_URLS", "http://s")])),
        None
    );
}

#[test]
fn cache_layout_is_elfutils() {
    let c = DebuginfodOptions::enabled()
        .with_url("http://s")
        .with_cache_dir("/c")
        .client_with_env(|_| None)
        .unwrap();
    assert_eq!(
        c.cache_path(&[0xab, 0x01, 0xff], Artifact::DebugInfo),
        Path::new("/c/ab01ff/debuginfo")
    );
    assert_eq!(
        c.cache_path(&[0xab], Artifact::Executable),
        Path::new("/c/ab/executable")
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "touches the file system, which Miri's isolation forbids"
)]
fn other_schemes_are_refused() {
    let dir = std::env::temp_dir().join(format!("mpir-dbgd-scheme-{}", std::process::id()));
    let c = DebuginfodOptions::enabled()
        .with_url("ftp://s")
        .with_cache_dir(&dir)
        .client_with_env(|_| None)
        .unwrap();
    let errors = c.fetch(&[1, 2, 3, 4], Artifact::DebugInfo).unwrap_err();
    let _ = std::fs::remove_dir_all(&dir);
    let expected = if cfg!(feature = "debuginfod") {
        FetchFailure::UnsupportedUrl
    } else {
        FetchFailure::NoHttp
    };
    assert!(
        matches!(&errors[..], [DebuginfodError::Fetch { reason, server, .. }] if *reason == expected && server == "ftp://s"),
        "{errors:?}"
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "touches the file system, which Miri's isolation forbids"
)]
fn nonsense_build_ids_are_not_asked_for() {
    let dir = std::env::temp_dir().join(format!("mpir-dbgd-badid-{}", std::process::id()));
    let c = DebuginfodOptions::enabled()
        .with_url("http://127.0.0.1:1")
        .with_cache_dir(&dir)
        .client_with_env(|_| None)
        .unwrap();
    for id in [&[][..], &[7][..], &[0xaa; MAX_BUILD_ID + 1][..]] {
        let errors = c.fetch(id, Artifact::DebugInfo).unwrap_err();
        assert!(
            matches!(&errors[..], [DebuginfodError::UnusableBuildId { len, .. }] if *len == id.len()),
            "{errors:?}"
        );
    }
    // Nothing was made on disk.
    assert!(!dir.exists());
}
