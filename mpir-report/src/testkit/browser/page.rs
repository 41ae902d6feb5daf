//! Driving the page: navigation, the viewport, DevTools commands, scripts, elements and
//! screenshots.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Browser, ELEMENT_KEY, ElementId, NAV_TIMEOUT};

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
