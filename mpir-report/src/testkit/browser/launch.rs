//! Starting and stopping a browser: finding chromedriver and Chromium, a free port and a
//! temporary profile, the driver's readiness and the session, and the teardown on drop.

use std::fs;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

use super::http::http;
use super::{Browser, CHROMIUM_ARGS, NAV_TIMEOUT, START_TIMEOUT};

fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| executable(p))
}

fn from_env(var: &str) -> Result<Option<PathBuf>, String> {
    match std::env::var_os(var) {
        Some(v) if !v.is_empty() => {
            let p = PathBuf::from(v);
            if executable(&p) {
                Ok(Some(p))
            } else {
                Err(format!("{var}={} is not an executable file", p.display()))
            }
        }
        _ => Ok(None),
    }
}

/// `MPIR_CHROMEDRIVER`, then `chromedriver` on PATH, then `/usr/bin/chromedriver`.
pub fn find_chromedriver() -> Result<PathBuf, String> {
    if let Some(p) = from_env("MPIR_CHROMEDRIVER")? {
        return Ok(p);
    }
    on_path("chromedriver")
        .or_else(|| Some(PathBuf::from("/usr/bin/chromedriver")).filter(|p| executable(p)))
        .ok_or_else(|| {
            "chromedriver not found (set MPIR_CHROMEDRIVER, or run ci-chromium.sh to install \
             Debian's chromium-driver)"
                .to_string()
        })
}

/// `MPIR_CHROMIUM`, then `/usr/bin/chromium`, then `chromium` on PATH.
pub fn find_chromium() -> Result<PathBuf, String> {
    if let Some(p) = from_env("MPIR_CHROMIUM")? {
        return Ok(p);
    }
    Some(PathBuf::from("/usr/bin/chromium"))
        .filter(|p| executable(p))
        .or_else(|| on_path("chromium"))
        .ok_or_else(|| {
            "chromium not found (set MPIR_CHROMIUM, or run ci-chromium.sh to install Debian's \
             chromium)"
                .to_string()
        })
}

fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding 127.0.0.1:0: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr: {e}"))
}

fn unique_temp_dir() -> Result<PathBuf, String> {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "mpir-browser-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir_all(dir.join("profile"))
        .map_err(|e| format!("creating {}: {e}", dir.display()))?;
    Ok(dir)
}

fn log_tail(path: &Path) -> String {
    let s = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Kill a process group with SIGKILL (via `kill(1)`, as std has no killpg without unsafe).
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// PIDs whose command line mentions `needle` (our unique profile directory): Chromium
/// processes that escaped the process group.
pub fn pids_mentioning(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let Ok(rd) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter(|&pid| pid != me)
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .collect()
}

impl Browser {
    /// Find the binaries, start chromedriver on a free port, wait (≤ 20 s) for it to be
    /// ready and open a headless session. `Err` says why (missing binary, driver or
    /// Chromium failing to start).
    pub fn start() -> Result<Browser, String> {
        let chromedriver = find_chromedriver()?;
        let chromium = find_chromium()?;
        let tmp = unique_temp_dir()?;
        // The port is released before chromedriver binds it: retry if someone took it.
        let mut last_err = String::new();
        for _attempt in 0..3 {
            let t0 = Instant::now();
            match Self::start_driver(&chromedriver, &tmp) {
                Ok((driver, port)) => {
                    let t_driver = t0.elapsed();
                    let mut b = Browser {
                        port,
                        session: String::new(),
                        driver,
                        tmp: tmp.clone(),
                        chromium: chromium.clone(),
                        chromedriver: chromedriver.clone(),
                        requests: Mutex::new(Vec::new()),
                        errors: Mutex::new(Vec::new()),
                    };
                    // On error `b` is dropped: driver killed, temp dir removed.
                    b.session = b.new_session()?;
                    let t_session = t0.elapsed() - t_driver;
                    // With Chromium/chromedriver 156 the first tab is the new-tab page
                    // (chrome://new-tab-page-third-party/), whose chrome:// loads land in
                    // the performance log: leave it, and drop those records. The first
                    // command also waits for that page to finish loading (~0.5 s).
                    b.open_url("about:blank")?;
                    b.set_viewport(1280, 1000)?;
                    let _ = b.read_log("performance");
                    let _ = b.read_log("browser");
                    if std::env::var_os("MPIR_BROWSER_TIMING").is_some() {
                        eprintln!(
                            "browser: chromedriver ready {t_driver:?}, session {t_session:?}, \
                             about:blank+viewport {:?}",
                            t0.elapsed() - t_session - t_driver
                        );
                    }
                    return Ok(b);
                }
                Err(e) => last_err = e,
            }
        }
        let _ = fs::remove_dir_all(&tmp);
        Err(last_err)
    }

    fn start_driver(chromedriver: &Path, tmp: &Path) -> Result<(Child, u16), String> {
        let port = free_port()?;
        let log_path = tmp.join("chromedriver.log");
        let log = fs::File::create(&log_path)
            .map_err(|e| format!("creating {}: {e}", log_path.display()))?;
        let log2 = log.try_clone().map_err(|e| format!("dup log fd: {e}"))?;
        let mut child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .arg("--allowed-ips=127.0.0.1")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0)
            .spawn()
            .map_err(|e| format!("spawning {}: {e}", chromedriver.display()))?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                return Err(format!(
                    "{} exited with {st} before becoming ready; log:\n{}",
                    chromedriver.display(),
                    log_tail(&log_path)
                ));
            }
            if let Ok((200, v)) = http(port, "GET", "/status", None, Duration::from_secs(2))
                && v["value"]["ready"].as_bool() == Some(true)
            {
                return Ok((child, port));
            }
            if Instant::now() >= deadline {
                kill_group(child.id());
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} not ready on port {port} within {START_TIMEOUT:?}; log:\n{}",
                    chromedriver.display(),
                    log_tail(&log_path)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn new_session(&self) -> Result<String, String> {
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|s| s.to_string()).collect();
        args.push(format!(
            "--user-data-dir={}",
            self.tmp.join("profile").display()
        ));
        let caps = json!({
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "pageLoadStrategy": "normal",
                    "unhandledPromptBehavior": "dismiss",
                    "timeouts": { "implicit": 0, "pageLoad": 60_000, "script": 30_000 },
                    "goog:chromeOptions": {
                        "binary": self.chromium.to_string_lossy(),
                        "args": args,
                        "perfLoggingPrefs": { "enableNetwork": true, "enablePage": true },
                    },
                    "goog:loggingPrefs": { "performance": "ALL", "browser": "ALL" },
                }
            }
        });
        let v = self
            .cmd("POST", "/session", Some(&caps), NAV_TIMEOUT)
            .map_err(|e| {
                let log = log_tail(&self.tmp.join("chromedriver.log"));
                format!(
                    "creating a Chromium session ({}): {e}\nchromedriver log:\n{log}",
                    self.chromium.display()
                )
            })?;
        v["sessionId"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("no sessionId in {v}"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = http(self.port, "DELETE", &path, None, Duration::from_secs(10));
        }
        // chromedriver leads its own group (process_group(0)): pgid == its pid.
        kill_group(self.driver.id());
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // Chromium processes that left the group still name our unique profile dir.
        let profile = self.tmp.join("profile").display().to_string();
        for pid in pids_mentioning(&profile) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        for _ in 0..20 {
            if fs::remove_dir_all(&self.tmp).is_ok() || !self.tmp.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
