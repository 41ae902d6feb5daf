//! What the page did, from chromedriver's logs: the requests it made (performance log) and
//! its console errors (browser log).

use serde_json::{Value, json};

use super::Browser;

impl Browser {
    /// Drain one chromedriver log (`performance`, `browser`, `driver`). Entries are handed
    /// out once: later calls return only newer ones.
    pub(super) fn read_log(&self, kind: &str) -> Result<Vec<Value>, String> {
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
