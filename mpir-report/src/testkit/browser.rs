//! Drive Debian's headless Chromium from integration tests over W3C WebDriver.
//!
//! Test support (std + `serde_json` only, no `unsafe`). It starts its own `chromedriver` on a free
//! localhost port (in its own process group), creates one headless session with the network
//! cut off (`--host-resolver-rules=MAP * ~NOTFOUND`) and the performance log on, and speaks
//! HTTP/1.1 to the driver on a plain `TcpStream` (one connection per request,
//! `Connection: close`).
//!
//! Binaries: `MPIR_CHROMEDRIVER`, else `chromedriver` on `PATH`, else `/usr/bin/chromedriver`;
//! `MPIR_CHROMIUM`, else `/usr/bin/chromium`, else `chromium` on `PATH`.
//! Install them with `scripts/ci-chromium.sh` (Debian's `chromium` and `chromium-driver`).
//!
//! Typical use:
//! ```ignore
//! let Some(b) = browser::require_or_skip() else { return };
//! b.open(&report_path)?;
//! assert_eq!(b.eval("return document.title")?, "x");
//! assert!(b.external_requests()?.is_empty());
//! ```
//!
//! Every wait is bounded: connect 5 s, HTTP reads [`HTTP_TIMEOUT`] (navigation
//! [`NAV_TIMEOUT`]), driver readiness [`START_TIMEOUT`]. Errors are `String`s with context.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// W3C key under which an element reference is serialised.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Read/write timeout of one ordinary WebDriver command.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// Read timeout of a navigation (a big report may take a few seconds to parse).
pub const NAV_TIMEOUT: Duration = Duration::from_secs(90);
/// How long to wait for chromedriver's `/status` to say `ready`.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest HTTP response body accepted (a full-page screenshot of a big report is a few MB).
const MAX_BODY: usize = 256 << 20;

/// The Chromium switches every session gets (plus `--user-data-dir=<temp>`).
pub const CHROMIUM_ARGS: &[&str] = &[
    "--headless=new",
    // Needed as root (CI and the dev machines run as root): Chromium refuses to start
    // its sandbox as uid 0.
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--disable-breakpad",
    "--metrics-recording-only",
    "--mute-audio",
    "--password-store=basic",
    "--use-mock-keychain",
    // No name resolves: any http(s) reference in a page fails fast with
    // ERR_NAME_NOT_RESOLVED (it is still logged as a request, see `network_requests`).
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--window-size=1280,1000", // outer size; `start` then emulates a 1280x1000 viewport
];

/// A W3C WebDriver element reference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementId(pub String);

impl ElementId {
    /// The element as a script argument (`arguments[i]` in [`Browser::eval_args`]).
    pub fn to_json(&self) -> Value {
        json!({ ELEMENT_KEY: self.0 })
    }
}

/// One headless Chromium session behind its own chromedriver. Dropping it deletes the
/// session, kills chromedriver's process group (and any Chromium left over) and removes
/// the temporary profile.
pub struct Browser {
    port: u16,
    session: String,
    driver: Child,
    tmp: PathBuf,
    chromium: PathBuf,
    chromedriver: PathBuf,
    /// Request URLs drained from the performance log since the last `open`.
    requests: Mutex<Vec<String>>,
    /// SEVERE browser-log messages drained since the last `open`.
    errors: Mutex<Vec<String>>,
}

/// Start a browser, or decide what a test does without one: print `skipped: <reason>` and
/// return `None`, or panic with the reason when `MPIR_REQUIRE_PEERS=1`.
pub fn require_or_skip() -> Option<Browser> {
    match Browser::start() {
        Ok(b) => Some(b),
        Err(reason) => {
            if std::env::var("MPIR_REQUIRE_PEERS").as_deref() == Ok("1") {
                panic!("MPIR_REQUIRE_PEERS=1 but the browser is unavailable: {reason}");
            }
            eprintln!("skipped: {reason}");
            None
        }
    }
}

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

/// A `file://` URL for an absolute path, percent-encoding everything but unreserved bytes
/// and `/`.
pub fn file_url(path: &Path) -> Result<String, String> {
    let abs = fs::canonicalize(path).map_err(|e| format!("resolving {}: {e}", path.display()))?;
    let s = abs
        .to_str()
        .ok_or_else(|| format!("{} is not UTF-8", abs.display()))?;
    let mut url = String::from("file://");
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(url)
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

    /// Chromium binary used.
    pub fn chromium_path(&self) -> &Path {
        &self.chromium
    }
    /// chromedriver binary used.
    pub fn chromedriver_path(&self) -> &Path {
        &self.chromedriver
    }
    /// Temporary directory (Chromium profile, chromedriver.log), removed on drop.
    pub fn temp_dir(&self) -> &Path {
        &self.tmp
    }
    /// chromedriver's pid (= its process-group id).
    pub fn driver_pid(&self) -> u32 {
        self.driver.id()
    }
    /// `navigator.userAgent` of the page (contains the Chromium version).
    pub fn user_agent(&self) -> Result<String, String> {
        Ok(self
            .eval("return navigator.userAgent")?
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// One WebDriver command: returns the response's `value`, or `Err` with the W3C error
    /// code and message.
    fn cmd(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        t: Duration,
    ) -> Result<Value, String> {
        let (status, mut v) =
            http(self.port, method, path, body, t).map_err(|e| format!("{method} {path}: {e}"))?;
        let value = v.get_mut("value").map(Value::take).unwrap_or(Value::Null);
        if status >= 400 || value.get("error").and_then(Value::as_str).is_some() {
            return Err(format!(
                "{method} {path}: HTTP {status}: {}: {}",
                value["error"].as_str().unwrap_or("?"),
                value["message"].as_str().unwrap_or(&value.to_string())
            ));
        }
        Ok(value)
    }

    fn s(&self, method: &str, tail: &str, body: Option<&Value>) -> Result<Value, String> {
        self.cmd(
            method,
            &format!("/session/{}{tail}", self.session),
            body,
            HTTP_TIMEOUT,
        )
    }

    /// Navigate to `path` as a `file://` URL and wait for its `load` event (≤ 60 s).
    /// Clears the request and console-error records of the previous page.
    pub fn open(&self, path: &Path) -> Result<(), String> {
        self.open_url(&file_url(path)?)
    }

    /// Navigate to any URL (see [`open`](Self::open)).
    pub fn open_url(&self, url: &str) -> Result<(), String> {
        // Drain what the previous page left in the logs so it is not attributed to this one.
        let _ = self.read_log("performance");
        let _ = self.read_log("browser");
        self.requests.lock().unwrap().clear();
        self.errors.lock().unwrap().clear();
        let path = format!("/session/{}/url", self.session);
        self.cmd("POST", &path, Some(&json!({ "url": url })), NAV_TIMEOUT)
            .map(|_| ())
    }

    /// Make the page's viewport (`innerWidth` x `innerHeight`, and screenshots) `width` x
    /// `height` CSS pixels at scale 1, by DevTools device-metrics emulation (it outlives
    /// navigations). `--window-size` alone sizes the outer window, which in headless mode
    /// still counts ~140 px of browser UI; `start` sets 1280x1000.
    pub fn set_viewport(&self, width: u32, height: u32) -> Result<(), String> {
        let metrics =
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false });
        self.cdp("Emulation.setDeviceMetricsOverride", metrics)
            .map(|_| ())
    }

    /// Send one Chrome DevTools Protocol command to the page (chromedriver's
    /// `goog/cdp/execute` extension) and return its result.
    pub fn cdp(&self, method: &str, params: Value) -> Result<Value, String> {
        let body = json!({ "cmd": method, "params": params });
        self.s("POST", "/goog/cdp/execute", Some(&body))
    }

    /// The current URL.
    pub fn url(&self) -> Result<String, String> {
        Ok(self
            .s("GET", "/url", None)?
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// Run `js` as a function body (use `return …`) and give back its JSON-serialised
    /// result. A thrown exception is an `Err`.
    pub fn eval(&self, js: &str) -> Result<Value, String> {
        self.eval_args(js, Vec::new())
    }

    /// [`eval`](Self::eval) with `arguments[0..]` (use [`ElementId::to_json`] for elements).
    pub fn eval_args(&self, js: &str, args: Vec<Value>) -> Result<Value, String> {
        self.s(
            "POST",
            "/execute/sync",
            Some(&json!({ "script": js, "args": args })),
        )
    }

    /// Run `js` asynchronously: it gets a `done` callback and must call `done(value)`
    /// within the script timeout (30 s).
    pub fn eval_async(&self, js: &str) -> Result<Value, String> {
        let script = format!("const done = arguments[arguments.length - 1];\n{js}");
        self.s(
            "POST",
            "/execute/async",
            Some(&json!({ "script": script, "args": [] })),
        )
    }

    /// Poll `js` (a function body with `return …`) every 25 ms until it returns something
    /// truthy (not null/false/0/""), and return that; `Err` after `timeout`.
    pub fn wait_until(&self, js: &str, timeout: Duration) -> Result<Value, String> {
        let deadline = Instant::now() + timeout;
        loop {
            let v = self.eval(js)?;
            let truthy = match &v {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64() != Some(0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return Ok(v);
            }
            if Instant::now() >= deadline {
                return Err(format!("timed out after {timeout:?} waiting for: {js}"));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    fn element(v: Value) -> Result<ElementId, String> {
        v.get(ELEMENT_KEY)
            .and_then(Value::as_str)
            .map(|s| ElementId(s.to_string()))
            .ok_or_else(|| format!("not an element reference: {v}"))
    }

    /// The first element matching the CSS selector (`Err` "no such element" if none).
    pub fn find(&self, css: &str) -> Result<ElementId, String> {
        let body = json!({ "using": "css selector", "value": css });
        Self::element(
            self.s("POST", "/element", Some(&body))
                .map_err(|e| format!("find {css:?}: {e}"))?,
        )
    }

    /// Every element matching the CSS selector, in document order (maybe none).
    pub fn find_all(&self, css: &str) -> Result<Vec<ElementId>, String> {
        let body = json!({ "using": "css selector", "value": css });
        match self
            .s("POST", "/elements", Some(&body))
            .map_err(|e| format!("find_all {css:?}: {e}"))?
        {
            Value::Array(a) => a.into_iter().map(Self::element).collect(),
            v => Err(format!("find_all {css:?}: not an array: {v}")),
        }
    }

    /// A real (trusted) click at the element's centre; it must be visible and not covered.
    pub fn click(&self, el: &ElementId) -> Result<(), String> {
        self.s(
            "POST",
            &format!("/element/{}/click", el.0),
            Some(&json!({})),
        )
        .map(|_| ())
    }

    /// The element's rendered text (`innerText`-like: hidden text is left out).
    pub fn text(&self, el: &ElementId) -> Result<String, String> {
        Ok(self
            .s("GET", &format!("/element/{}/text", el.0), None)?
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// Focus the element and type `keys` (real key events: `keydown`/`input`/`keyup`).
    pub fn send_keys(&self, el: &ElementId, keys: &str) -> Result<(), String> {
        self.s(
            "POST",
            &format!("/element/{}/value", el.0),
            Some(&json!({ "text": keys })),
        )
        .map(|_| ())
    }

    /// Clear an `<input>`/`<textarea>` (fires `change`, not `input`).
    pub fn clear(&self, el: &ElementId) -> Result<(), String> {
        self.s(
            "POST",
            &format!("/element/{}/clear", el.0),
            Some(&json!({})),
        )
        .map(|_| ())
    }

    /// Whether the element is rendered visibly (WebDriver's "element displayedness").
    pub fn is_displayed(&self, el: &ElementId) -> Result<bool, String> {
        Ok(self
            .s("GET", &format!("/element/{}/displayed", el.0), None)?
            .as_bool()
            .unwrap_or(false))
    }

    /// A DOM property of the element (`open`, `value`, `checked`, …).
    pub fn property(&self, el: &ElementId, name: &str) -> Result<Value, String> {
        self.s("GET", &format!("/element/{}/property/{name}", el.0), None)
    }

    /// An attribute of the element (`None` if absent).
    pub fn attribute(&self, el: &ElementId, name: &str) -> Result<Option<String>, String> {
        Ok(self
            .s("GET", &format!("/element/{}/attribute/{name}", el.0), None)?
            .as_str()
            .map(str::to_string))
    }

    /// Save a PNG of the viewport (1280x1000) to `path`.
    pub fn screenshot(&self, path: &Path) -> Result<(), String> {
        let b64 = self.s("GET", "/screenshot", None)?;
        let png = base64_decode(b64.as_str().unwrap_or_default())?;
        fs::write(path, png).map_err(|e| format!("writing {}: {e}", path.display()))
    }

    /// Drain one chromedriver log (`performance`, `browser`, `driver`). Entries are handed
    /// out once: later calls return only newer ones.
    fn read_log(&self, kind: &str) -> Result<Vec<Value>, String> {
        let body = json!({ "type": kind });
        let v = match self.s("POST", "/se/log", Some(&body)) {
            Ok(v) => v,
            // Older chromedrivers only have the legacy JSON-wire endpoint.
            Err(e) if e.contains("unknown command") => self.s("POST", "/log", Some(&body))?,
            Err(e) => return Err(e),
        };
        match v {
            Value::Array(a) => Ok(a),
            v => Err(format!("log {kind}: not an array: {v}")),
        }
    }

    /// URLs of every request the current page made since [`open`](Self::open), first-seen
    /// order, deduplicated: the page itself, subresources, fetch/XHR/beacon, redirects,
    /// navigations the page asked for, WebSocket and WebTransport URLs — all from the
    /// performance (DevTools) log. Requests that failed (no network here) are included.
    pub fn network_requests(&self) -> Result<Vec<String>, String> {
        let entries = self.read_log("performance")?;
        let mut seen = self.requests.lock().unwrap();
        for e in entries {
            let Some(msg) = e["message"].as_str() else {
                continue;
            };
            let Ok(m) = serde_json::from_str::<Value>(msg) else {
                continue;
            };
            let m = &m["message"];
            let p = &m["params"];
            // Chromium's own WebUI pages (the first tab's new-tab page) are not the page's.
            let doc = p["documentURL"].as_str().unwrap_or_default();
            if ["chrome://", "chrome-untrusted://", "devtools://"]
                .iter()
                .any(|s| doc.starts_with(s))
            {
                continue;
            }
            let url = match m["method"].as_str().unwrap_or_default() {
                "Network.requestWillBeSent" => p["request"]["url"].as_str(),
                "Network.webSocketCreated"
                | "Network.webTransportCreated"
                | "Page.frameRequestedNavigation"
                | "Page.frameScheduledNavigation" => p["url"].as_str(),
                _ => None,
            };
            if let Some(u) = url
                && !seen.iter().any(|s| s == u)
            {
                seen.push(u.to_string());
            }
        }
        Ok(seen.clone())
    }

    /// [`network_requests`](Self::network_requests) minus the self-contained schemes
    /// (`file:`, `data:`, `blob:`, `about:`, `javascript:`): what an offline report must
    /// never make.
    pub fn external_requests(&self) -> Result<Vec<String>, String> {
        Ok(self
            .network_requests()?
            .into_iter()
            .filter(|u| {
                !["file:", "data:", "blob:", "about:", "javascript:"]
                    .iter()
                    .any(|s| u.starts_with(s))
            })
            .collect())
    }

    /// `SEVERE` entries of the browser log since [`open`](Self::open): `console.error`
    /// calls, uncaught exceptions, failed resource loads.
    pub fn console_errors(&self) -> Result<Vec<String>, String> {
        let entries = self.read_log("browser")?;
        let mut errs = self.errors.lock().unwrap();
        for e in entries {
            if e["level"].as_str() == Some("SEVERE") {
                errs.push(e["message"].as_str().unwrap_or_default().to_string());
            }
        }
        Ok(errs.clone())
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

// ---------------------------------------------------------------------------------------
// Minimal HTTP/1.1 client: one request per connection, JSON bodies.

/// Send one request to `127.0.0.1:port` and parse the JSON response (`Null` when empty).
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&Value>,
    timeout: Duration,
) -> Result<(u16, Value), String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let _ = stream.set_nodelay(true);
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\nConnection: close\r\n"
    );
    if body.is_some() || method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n",
            payload.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(&payload);
    stream
        .write_all(req.as_bytes())
        .map_err(|e| format!("sending request: {e}"))?;
    stream
        .flush()
        .map_err(|e| format!("sending request: {e}"))?;

    let mut r = BufReader::new(stream);
    let mut line = String::new();
    read_line(&mut r, &mut line)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {line:?}"))?;
    let mut content_length: Option<usize> = None;
    let mut chunked = false;
    loop {
        read_line(&mut r, &mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "content-length" {
                content_length = Some(v.parse().map_err(|_| format!("bad Content-Length {v:?}"))?);
            } else if k == "transfer-encoding" && v.to_ascii_lowercase().contains("chunked") {
                chunked = true;
            }
        }
    }
    let mut data = Vec::new();
    if chunked {
        loop {
            read_line(&mut r, &mut line)?;
            let hex = line.trim().split(';').next().unwrap_or("");
            let n =
                usize::from_str_radix(hex, 16).map_err(|_| format!("bad chunk size {line:?}"))?;
            if n == 0 {
                break; // trailers, if any, are ignored (the connection is closed anyway)
            }
            if data.len() + n > MAX_BODY {
                return Err("response too large".into());
            }
            let start = data.len();
            data.resize(start + n, 0);
            r.read_exact(&mut data[start..])
                .map_err(|e| format!("reading chunk: {e}"))?;
            read_line(&mut r, &mut line)?; // CRLF after the chunk
        }
    } else if let Some(n) = content_length {
        if n > MAX_BODY {
            return Err(format!("response too large ({n} bytes)"));
        }
        data.resize(n, 0);
        r.read_exact(&mut data)
            .map_err(|e| format!("reading body ({n} bytes): {e}"))?;
    } else {
        r.take(MAX_BODY as u64)
            .read_to_end(&mut data)
            .map_err(|e| format!("reading body: {e}"))?;
    }
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok((status, Value::Null));
    }
    let v = serde_json::from_slice(&data).map_err(|e| {
        format!(
            "HTTP {status}: bad JSON ({e}): {}",
            String::from_utf8_lossy(&data[..data.len().min(300)])
        )
    })?;
    Ok((status, v))
}

fn read_line(r: &mut BufReader<TcpStream>, line: &mut String) -> Result<(), String> {
    line.clear();
    let n = r
        .by_ref()
        .take(64 * 1024)
        .read_line(line)
        .map_err(|e| format!("reading response: {e}"))?;
    if n == 0 {
        return Err("connection closed before the response was complete".into());
    }
    Ok(())
}

fn base64_decode(s: &str) -> Result<Vec<u8>, String> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=') {
        acc = (acc << 6) | val(c).ok_or_else(|| format!("bad base64 byte {c:#x}"))?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Ok(out)
}
