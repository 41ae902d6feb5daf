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
//!
//! The parts: `launch` finds the binaries and starts (and tears down) the driver and its
//! session, `page` drives the page (navigation, scripts, elements, screenshots), `logs` drains
//! what the page requested and logged, and `http` is the minimal HTTP client underneath.

mod http;
mod launch;
mod logs;
mod page;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

pub use http::http;
pub use launch::{find_chromedriver, find_chromium, pids_mentioning};
pub use page::file_url;

/// W3C key under which an element reference is serialised.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Read/write timeout of one ordinary WebDriver command.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// Read timeout of a navigation (a big report may take a few seconds to parse).
pub const NAV_TIMEOUT: Duration = Duration::from_secs(90);
/// How long to wait for chromedriver's `/status` to say `ready`.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);

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

impl Browser {
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
}
