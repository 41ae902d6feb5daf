//! Open MPI struct layouts shipped with the tool, for the stock builds that carry no debug
//! information (distribution and Spack packages, the PyPI wheel): the member offsets and sizes
//! the ob1 walker and Open MPI's message-queue DLL ask for, generated from each release's
//! headers under the configurations that change them, stored as reviewed text in
//! `mpir-mqd/src/layouts/openmpi/` and embedded in the binary.
//!
//! A set is used only for the process it was **proven** on ([`choose`]): the release is read
//! from the process (the selected PML component's MCA version), the candidates are the sets of
//! that release (or of its series when the release itself has none) for the process's data
//! model, and one is accepted only when it decodes the process's own `MPI_COMM_WORLD` and
//! `MPI_COMM_SELF` consistently. Debug information or a types sidecar, when the process has one,
//! always wins ([`ShippedTypes`] asks them first).
//!
//! The text format (one set per file, `#` comments):
//!
//! ```text
//! mpir-layouts 1
//! library openmpi 4.1.4
//! config debian
//! model lp64
//! debug no
//! source openmpi_4.1.4.orig.tar.xz sha256:… + libopenmpi-dev 4.1.4-3 headers
//! type opal_list_item_t 32
//! member super 0 16 other
//! member opal_list_next 16 8 pointer
//! end
//! ```

mod choose;
mod generate;
mod shipped;
mod target;

use std::collections::BTreeMap;
use std::fmt;

use mpir_types::{DataModel, LayoutSource, MemberKind, MemberLayout, TypeLayout};

pub use choose::{
    Candidate, Chosen, Expect, Identity, LayoutRefusal, Proof, RefusalReason, choose, choose_among,
    identify, needs_shipped, prove_again,
};
pub use generate::{GenerateError, generate};
pub use shipped::{shipped, shipped_files};
pub use target::ShippedTypes;

/// The format version this build reads and writes.
pub const FORMAT: u32 = 1;
/// The most types one set may describe, and members one type may have (the text is ours, but
/// a user may point the tool at another file).
const MAX_TYPES: usize = 512;
const MAX_MEMBERS: usize = 4096;

/// An Open MPI release number, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[allow(
    clippy::exhaustive_structs,
    reason = "a release number is these three parts"
)]
pub struct Release {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Release (patch) number.
    pub patch: u32,
}

impl Release {
    /// `major.minor.patch`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Release {
            major,
            minor,
            patch,
        }
    }

    /// Parses `4.1.4`.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split('.').map(|p| p.parse::<u32>().ok());
        let r = Release::new(parts.next()??, parts.next()??, parts.next()??);
        parts.next().is_none().then_some(r)
    }

    /// Whether `other` is of the same `major.minor` series.
    pub fn same_series(&self, other: &Release) -> bool {
        self.major == other.major && self.minor == other.minor
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// One release's layouts under one configuration, for one data model.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LayoutSet {
    /// The Open MPI release.
    pub release: Release,
    /// The configuration's name (`debian`, `debug`, `wheel`, …).
    pub config: String,
    /// The data model the layouts are for.
    pub model: DataModel,
    /// Whether the configuration is a debug build (`--enable-debug`).
    pub debug: bool,
    /// Where the layouts were generated from (archive and checksum).
    pub source: String,
    types: BTreeMap<String, TypeLayout>,
}

/// A layouts file that does not parse: the line (1-based) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("layouts line {line}: {reason}")]
#[non_exhaustive]
pub struct ParseError {
    /// The line, counted from 1 (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl LayoutSet {
    /// A set with no types yet.
    pub fn new(
        release: Release,
        config: impl Into<String>,
        model: DataModel,
        debug: bool,
        source: impl Into<String>,
    ) -> Self {
        LayoutSet {
            release,
            config: config.into(),
            model,
            debug,
            source: source.into(),
            types: BTreeMap::new(),
        }
    }

    /// Adds (or replaces) a type; its source is rewritten to this set's.
    pub fn insert(&mut self, mut layout: TypeLayout) {
        layout.source = LayoutSource::Given;
        self.types.insert(layout.name.clone(), layout);
    }

    /// A short name: `openmpi 4.1.4 debian lp64`.
    pub fn id(&self) -> String {
        format!("openmpi {} {} {}", self.release, self.config, self.model)
    }

    /// Where a layout of this set says it came from.
    pub fn layout_source(&self) -> LayoutSource {
        LayoutSource::Shipped { set: self.id() }
    }

    /// The type `name`, its source naming this set.
    pub fn get(&self, name: &str) -> Option<TypeLayout> {
        let mut t = self.types.get(name)?.clone();
        t.source = self.layout_source();
        Some(t)
    }

    /// The names of the types described.
    pub fn type_names(&self) -> impl Iterator<Item = &str> {
        self.types.keys().map(String::as_str)
    }

    /// The same set with the member `member` of `type_name` moved to `offset` (tests of the
    /// proof use it to make a layout that almost fits). `None` when there is no such member.
    pub fn with_member_moved(&self, type_name: &str, member: &str, offset: u64) -> Option<Self> {
        let mut set = self.clone();
        let m = set
            .types
            .get_mut(type_name)?
            .members
            .iter_mut()
            .find(|m| m.name == member)?;
        m.offset = offset;
        set.config = format!("{}+{type_name}.{member}@{offset}", self.config);
        Some(set)
    }

    /// The set as text (the format in the module's documentation); `parse` reads it back.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# Open MPI {} struct layouts, configuration {:?}, data model {}.\n\
             # Generated by `mpir layouts generate`; do not edit by hand (see \
             mpir-mqd/src/layouts/openmpi/README.md).",
            self.release, self.config, self.model
        );
        let _ = writeln!(out, "mpir-layouts {FORMAT}");
        let _ = writeln!(out, "library openmpi {}", self.release);
        let _ = writeln!(out, "config {}", self.config);
        let _ = writeln!(out, "model {}", self.model);
        let _ = writeln!(out, "debug {}", if self.debug { "yes" } else { "no" });
        let _ = writeln!(out, "source {}", self.source);
        for t in self.types.values() {
            let _ = writeln!(out, "type {} {}", t.name, t.byte_size);
            for m in &t.members {
                let size = m
                    .byte_size
                    .map_or_else(|| "-".to_string(), |s| s.to_string());
                let kind = match m.kind {
                    MemberKind::Pointer => "pointer",
                    MemberKind::Array => "array",
                    MemberKind::Other => "other",
                    _ => "unknown",
                };
                let _ = writeln!(out, "member {} {} {size} {kind}", m.name, m.offset);
            }
            let _ = writeln!(out, "end");
        }
        out
    }

    /// Reads a set from its text.
    pub fn parse(text: &str) -> Result<Self, ParseError> {
        let err = |line: usize, reason: String| ParseError { line, reason };
        let mut header: BTreeMap<&str, (usize, &str)> = BTreeMap::new();
        let mut types: BTreeMap<String, TypeLayout> = BTreeMap::new();
        let mut open: Option<(usize, TypeLayout)> = None;
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
            match (word, &mut open) {
                ("member", Some((_, t))) => {
                    let f: Vec<&str> = rest.split_whitespace().collect();
                    let [name, offset, size, kind] = f[..] else {
                        return Err(err(
                            n,
                            "a member line is `member NAME OFFSET SIZE KIND`".into(),
                        ));
                    };
                    let offset =
                        number(offset).ok_or_else(|| err(n, format!("bad offset {offset:?}")))?;
                    let size = match size {
                        "-" => None,
                        s => Some(number(s).ok_or_else(|| err(n, format!("bad size {s:?}")))?),
                    };
                    let kind = match kind {
                        "pointer" => MemberKind::Pointer,
                        "array" => MemberKind::Array,
                        "other" => MemberKind::Other,
                        "unknown" => MemberKind::Unknown,
                        k => return Err(err(n, format!("unknown member kind {k:?}"))),
                    };
                    if offset
                        .checked_add(size.unwrap_or(0))
                        .is_none_or(|end| end > t.byte_size)
                    {
                        return Err(err(
                            n,
                            format!(
                                "member {name} lies outside the {}-byte {}",
                                t.byte_size, t.name
                            ),
                        ));
                    }
                    if t.members.len() >= MAX_MEMBERS {
                        return Err(err(
                            n,
                            format!("{} has more than {MAX_MEMBERS} members", t.name),
                        ));
                    }
                    t.members
                        .push(MemberLayout::new(name, offset, size).with_kind(kind));
                }
                ("end", Some(_)) => {
                    if let Some((_, t)) = open.take() {
                        types.insert(t.name.clone(), t);
                    }
                }
                ("type", None) => {
                    let f: Vec<&str> = rest.split_whitespace().collect();
                    let [name, size] = f[..] else {
                        return Err(err(n, "a type line is `type NAME SIZE`".into()));
                    };
                    let size = number(size).ok_or_else(|| err(n, format!("bad size {size:?}")))?;
                    if types.contains_key(name) {
                        return Err(err(n, format!("type {name} twice")));
                    }
                    if types.len() >= MAX_TYPES {
                        return Err(err(n, format!("more than {MAX_TYPES} types")));
                    }
                    open = Some((n, TypeLayout::new(name, size, LayoutSource::Given)));
                }
                ("mpir-layouts" | "library" | "config" | "model" | "debug" | "source", None) => {
                    if header.insert(word, (n, rest.trim())).is_some() {
                        return Err(err(n, format!("`{word}` twice")));
                    }
                }
                (w, Some((start, t))) => {
                    return Err(err(
                        n,
                        format!(
                            "`{w}` inside type {} (opened on line {start}; `end` missing?)",
                            t.name
                        ),
                    ));
                }
                (w, None) => return Err(err(n, format!("unknown line `{w}`"))),
            }
        }
        if let Some((start, t)) = open {
            return Err(err(start, format!("type {} has no `end`", t.name)));
        }
        let get = |key: &str| {
            header
                .get(key)
                .copied()
                .ok_or_else(|| err(0, format!("no `{key}` line")))
        };
        let (n, format) = get("mpir-layouts")?;
        if format != FORMAT.to_string() {
            return Err(err(
                n,
                format!("format {format}; this build reads format {FORMAT}"),
            ));
        }
        let (n, library) = get("library")?;
        let release = match library.split_once(' ') {
            Some(("openmpi", r)) => Release::parse(r.trim()),
            _ => None,
        }
        .ok_or_else(|| {
            err(
                n,
                format!("`library {library}`: expected `library openmpi X.Y.Z`"),
            )
        })?;
        let (n, model) = get("model")?;
        let model = DataModel::from_name(model)
            .ok_or_else(|| err(n, format!("unknown data model {model:?}")))?;
        let (n, debug) = get("debug")?;
        let debug = match debug {
            "yes" => true,
            "no" => false,
            d => return Err(err(n, format!("`debug {d}`: yes or no"))),
        };
        let (_, config) = get("config")?;
        if config.is_empty() || config.contains(char::is_whitespace) {
            return Err(err(get("config")?.0, "the config is one word".into()));
        }
        let (_, source) = get("source")?;
        Ok(LayoutSet {
            release,
            config: config.to_string(),
            model,
            debug,
            source: source.to_string(),
            types,
        })
    }
}

fn number(text: &str) -> Option<u64> {
    text.parse().ok()
}

#[cfg(test)]
mod tests;
