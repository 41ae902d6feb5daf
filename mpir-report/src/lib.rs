//! # mpir-report
//!
//! One self-contained HTML file that shows an MPI job's state at a glance, drawn from the JSON
//! documents of `mpir-json` (the same ones `mpir --json` prints):
//!
//! - the verdict at the top (hang or not, its kind) and what it covers (ranks read and not
//!   read, with reasons);
//! - the merged stack tree (`mpir.stacks/2`) as a collapsible tree with each node's rank set,
//!   the equivalence classes (the ranks ending at each leaf), the ranks that did not move,
//!   source `file:line` where known, and a search by function or rank;
//! - the wait-for graph (`mpir.deadlock/4`) drawn as SVG, cycles highlighted, the ranks blocked
//!   by a cycle apart, equivalent ranks grouped so that thousands of ranks stay legible;
//! - each rank's pending operations in a table that can be filtered;
//! - the job (`mpir.job/1`) and the command and version that made the report.
//!
//! The page is a view of the documents, embedded unchanged in a `<script
//! type="application/json">` element (`id="mpir-data"`, the [`SCHEMA`] envelope). It needs no
//! network: no external script, style, font or image, and a Content-Security-Policy that allows
//! only the page's own inline script and style (by their SHA-256) and nothing else — a browser
//! refuses any other script or fetch. Every string from the target (function, file, host and
//! communicator names) reaches the page as JSON data and is shown as text (`textContent`), never
//! parsed as markup.
//!
//! ```
//! let stacks = serde_json::json!({"schema": "mpir.stacks/2", "nodes": []});
//! let html = mpir_report::Report::new(vec!["mpir".into(), "stacks".into()])
//!     .with_document(stacks)
//!     .unwrap()
//!     .to_html();
//! assert!(html.starts_with("<!DOCTYPE html>"));
//! ```

#![forbid(unsafe_code)]

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use serde_json::{Map, Value};

#[cfg(feature = "testkit")]
pub mod testkit;

/// The `schema` of the envelope embedded in the page (`docs/schema/report.v1.json`).
pub const SCHEMA: &str = "mpir.report/1";

/// The page's script and style, embedded at build time.
const SCRIPT: &str = include_str!("../assets/report.js");
const STYLE: &str = include_str!("../assets/report.css");

/// What a report can hold, by the `schema` of each document.
const KINDS: [(&str, &str); 4] = [
    ("job", "mpir.job/"),
    ("stacks", "mpir.stacks/"),
    ("deadlock", "mpir.deadlock/"),
    ("queues", "mpir.queues/"),
];

/// Why a document cannot go into a report, or the report cannot be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The document has no `schema` a report shows.
    #[error(
        "a report shows mpir.job, mpir.stacks, mpir.deadlock and mpir.queues documents, not {schema:?}"
    )]
    Unsupported {
        /// The document's `schema`, or `""` when it has none.
        schema: String,
    },
    /// Two documents of one kind.
    #[error("the report already has a {kind} document")]
    Duplicate {
        /// `job`, `stacks`, `deadlock` or `queues`.
        kind: &'static str,
    },
    /// The file cannot be written (the report is written to a temporary file beside it and
    /// renamed, so a failed write leaves no partial report).
    #[error("cannot write the report {path}")]
    Write {
        /// The report's path.
        path: String,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}

/// A report being put together: the command that made it, and its documents.
#[derive(Debug, Clone)]
pub struct Report {
    command: Vec<String>,
    version: String,
    created: String,
    title: Option<String>,
    documents: Map<String, Value>,
    notes: Vec<String>,
}

impl Report {
    /// A report made by `command` (the tool's arguments, shown in the page), dated now, with
    /// this crate's version as the tool's (see [`Report::with_version`]).
    pub fn new(command: Vec<String>) -> Self {
        Self {
            command,
            version: env!("CARGO_PKG_VERSION").to_string(),
            created: utc_now(),
            title: None,
            documents: Map::new(),
            notes: Vec::new(),
        }
    }

    /// The tool's version shown in the page.
    pub fn with_version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// The title of the page (default: "mpir report").
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// The date shown (RFC 3339, UTC), instead of now: for reproducible output.
    pub fn with_created(mut self, created: impl Into<String>) -> Self {
        self.created = created.into();
        self
    }

    /// A line shown under the verdict (why the report was written, for example a watch's
    /// trigger).
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    /// Adds a document, placed by its `schema`: `mpir.job/*`, `mpir.stacks/*`,
    /// `mpir.deadlock/*` or `mpir.queues/*`, one of each.
    pub fn with_document(mut self, document: Value) -> Result<Self, ReportError> {
        let schema = document
            .get("schema")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let Some((kind, _)) = KINDS.iter().find(|(_, p)| schema.starts_with(p)) else {
            return Err(ReportError::Unsupported { schema });
        };
        if self.documents.contains_key(*kind) {
            return Err(ReportError::Duplicate { kind });
        }
        self.documents.insert((*kind).to_string(), document);
        Ok(self)
    }

    /// The envelope embedded in the page (`mpir.report/1`): tool, command, date, notes and
    /// the documents by kind.
    pub fn envelope(&self) -> Value {
        serde_json::json!({
            "schema": SCHEMA,
            "tool": {"name": "mpir", "version": self.version},
            "command": self.command,
            "created": self.created,
            "notes": self.notes,
            "documents": self.documents,
        })
    }

    /// The whole page.
    pub fn to_html(&self) -> String {
        let data = script_safe_json(&self.envelope());
        let title = self.title.as_deref().unwrap_or("mpir report");
        let mut page = String::with_capacity(data.len() + SCRIPT.len() + STYLE.len() + 2048);
        let _ = write!(
            page,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta name=\"generator\" content=\"mpir {version}\">\n\
             <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n\
             <body data-rendered=\"no\">\n\
             <noscript><p>This report draws itself with JavaScript, which is off. Its data is \
             the JSON in the element <code>mpir-data</code> of this file's source.</p></noscript>\n\
             <div id=\"app\"></div>\n\
             <script type=\"application/json\" id=\"mpir-data\">{data}</script>\n\
             <script>{SCRIPT}</script>\n</body>\n</html>\n",
            csp = csp(),
            version = escape_html(&self.version),
            title = escape_html(title),
        );
        page
    }

    /// Writes the page to `path`, through a temporary file in the same directory renamed into
    /// place: a full disk or a vanished directory leaves no partial report.
    pub fn write(&self, path: &Path) -> Result<u64, ReportError> {
        let html = self.to_html();
        write_atomically(path, html.as_bytes()).map_err(|source| ReportError::Write {
            path: path.display().to_string(),
            source,
        })?;
        Ok(html.len() as u64)
    }
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed into place; the
/// temporary file is removed when anything fails.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let name = path
        .file_name()
        .map_or_else(|| "report".into(), |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// The page's Content-Security-Policy: nothing may load; only the page's own script and style
/// run, named by their SHA-256.
fn csp() -> String {
    format!(
        "default-src 'none'; script-src 'sha256-{}'; style-src 'sha256-{}'; img-src 'none'; \
         base-uri 'none'; form-action 'none'",
        sha256_base64(SCRIPT),
        sha256_base64(STYLE)
    )
}

fn sha256_base64(text: &str) -> String {
    base64(ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref())
}

/// Standard base64 with padding (what CSP hash sources use).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// JSON that can sit inside a `<script>` element: `<`, `>` and `&` written as `\u003c`,
/// `\u003e`, `\u0026` (so no `</script>` or `<!--` can end or change the element), and the line
/// separators U+2028/U+2029 escaped as well. `JSON.parse` reads the same value back.
pub fn script_safe_json(value: &Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for c in text.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Text for HTML element content and attribute values.
fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Now, as RFC 3339 in UTC (`2026-11-28T14:30:05Z`).
fn utc_now() -> String {
    rfc3339_utc(std::time::SystemTime::now())
}

fn epoch_secs(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `t` as RFC 3339 in UTC, to the second (`2026-11-28T14:30:05Z`).
pub fn rfc3339_utc(t: std::time::SystemTime) -> String {
    rfc3339(epoch_secs(t))
}

/// `t` in UTC for file names, to the second (`20261128T143005Z`).
pub fn compact_utc(t: std::time::SystemTime) -> String {
    rfc3339(epoch_secs(t)).replace(['-', ':'], "")
}

/// Seconds since the epoch as RFC 3339 in UTC (the civil-from-days algorithm).
fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want, "{input:?}");
        }
    }

    #[test]
    fn dates_are_civil_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 (a leap day of a century leap year) 12:34:56.
        assert_eq!(rfc3339(951_827_696), "2000-02-29T12:34:56Z");
        assert_eq!(rfc3339(1_795_867_200), "2026-11-28T12:00:00Z");
    }

    #[test]
    fn hostile_strings_cannot_close_the_data_element() {
        let v = serde_json::json!({"f": "</script><script>alert(1)</script><!-- \u{2028}&"});
        let s = script_safe_json(&v);
        assert!(
            !s.contains('<') && !s.contains('>') && !s.contains('&'),
            "{s}"
        );
        assert!(!s.contains('\u{2028}'));
        let back: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn documents_are_placed_by_schema_once() {
        let r = Report::new(vec![])
            .with_document(serde_json::json!({"schema": "mpir.stacks/2"}))
            .unwrap();
        assert!(matches!(
            r.clone()
                .with_document(serde_json::json!({"schema": "mpir.stacks/2"})),
            Err(ReportError::Duplicate { kind: "stacks" })
        ));
        assert!(matches!(
            r.with_document(serde_json::json!({"schema": "other/1"})),
            Err(ReportError::Unsupported { .. })
        ));
    }

    #[test]
    fn the_policy_names_the_page_s_own_script_and_style() {
        let html = Report::new(vec![]).to_html();
        let script = sha256_base64(SCRIPT);
        assert!(html.contains(&format!("'sha256-{script}'")));
        assert!(html.contains(&format!("<script>{SCRIPT}</script>")));
        assert!(html.contains(&format!("<style>{STYLE}</style>")));
    }
}
