//! Why a rank was not read: one vocabulary for every command, document, the agents' wire and
//! the bindings (issue 31). A [`NotRead`] is a [`ReasonCode`] (a stable, machine-readable
//! word), one line of text for a person, and the structured detail some reasons have (the
//! kernel's [`AccessDenial`], the node, the MPI types missing).
//!
//! The same cause gives the same `NotRead` in queues, stacks and deadlock reads: the code and
//! the text are made once, where the cause is known (the session), and carried as they are —
//! over the wire too — never rebuilt from another form. A code this build does not know (from
//! a newer agent) is kept as it came, with its text.

use std::fmt;

use crate::access::AccessDenial;

/// The machine-readable word of a [`NotRead`]. Its string form ([`as_str`](ReasonCode::as_str))
/// is what documents and the wire carry; an unknown word is kept as [`ReasonCode::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(into = "String", from = "String"))]
#[non_exhaustive]
pub enum ReasonCode {
    /// On another node that no agent read it from: nothing was done to its pid here.
    Remote,
    /// Not proven to be the rank the table names: not touched.
    Refused,
    /// The kernel refused this tool the process ([`NotRead::denial`] says why).
    Denied,
    /// The process exited (or its pid names another process now): left alone.
    Exited,
    /// It did not stop in time, or stopping it failed.
    NotStopped,
    /// The acquisition did not attach it, and no other reason is known.
    NotAttached,
    /// A pid named by the caller names no process.
    NoSuchProcess,
    /// The table gives no usable pid.
    NoPid,
    /// Stopped, but its memory, symbols or types could not be opened.
    OpenFailed,
    /// Held, but reading it failed.
    ReadFailed,
    /// No queue reader could be set up for the job.
    NoReader,
    /// The MPI keeps no message queue to read.
    NotExported,
    /// The MPI's types needed to read the queues are not known ([`NotRead::missing_types`]).
    MissingTypes,
    /// Its node's agent could not be started.
    AgentNotStarted,
    /// Its node's agent cannot be reached any more.
    AgentUnreachable,
    /// Its node's agent did not answer in time.
    AgentTimedOut,
    /// Its node's agent answered something unusable.
    AgentBadAnswer,
    /// No core file for the rank.
    NoCore,
    /// Not selected, so not asked.
    NotSelected,
    /// A word this build does not know (a newer peer's), kept as it came.
    Other(String),
}

impl ReasonCode {
    /// Every known code, for documentation and schemas.
    pub const KNOWN: [ReasonCode; 19] = [
        ReasonCode::Remote,
        ReasonCode::Refused,
        ReasonCode::Denied,
        ReasonCode::Exited,
        ReasonCode::NotStopped,
        ReasonCode::NotAttached,
        ReasonCode::NoSuchProcess,
        ReasonCode::NoPid,
        ReasonCode::OpenFailed,
        ReasonCode::ReadFailed,
        ReasonCode::NoReader,
        ReasonCode::NotExported,
        ReasonCode::MissingTypes,
        ReasonCode::AgentNotStarted,
        ReasonCode::AgentUnreachable,
        ReasonCode::AgentTimedOut,
        ReasonCode::AgentBadAnswer,
        ReasonCode::NoCore,
        ReasonCode::NotSelected,
    ];

    /// The word (`"denied"`, `"agent_timed_out"`…).
    pub fn as_str(&self) -> &str {
        match self {
            ReasonCode::Remote => "remote",
            ReasonCode::Refused => "refused",
            ReasonCode::Denied => "denied",
            ReasonCode::Exited => "exited",
            ReasonCode::NotStopped => "not_stopped",
            ReasonCode::NotAttached => "not_attached",
            ReasonCode::NoSuchProcess => "no_such_process",
            ReasonCode::NoPid => "no_pid",
            ReasonCode::OpenFailed => "open_failed",
            ReasonCode::ReadFailed => "read_failed",
            ReasonCode::NoReader => "no_reader",
            ReasonCode::NotExported => "not_exported",
            ReasonCode::MissingTypes => "missing_types",
            ReasonCode::AgentNotStarted => "agent_not_started",
            ReasonCode::AgentUnreachable => "agent_unreachable",
            ReasonCode::AgentTimedOut => "agent_timed_out",
            ReasonCode::AgentBadAnswer => "agent_bad_answer",
            ReasonCode::NoCore => "no_core",
            ReasonCode::NotSelected => "not_selected",
            ReasonCode::Other(word) => word,
        }
    }
}

impl fmt::Display for ReasonCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<String> for ReasonCode {
    fn from(word: String) -> Self {
        ReasonCode::KNOWN
            .into_iter()
            .find(|c| c.as_str() == word)
            .unwrap_or(ReasonCode::Other(word))
    }
}

impl From<ReasonCode> for String {
    fn from(code: ReasonCode) -> Self {
        code.as_str().to_string()
    }
}

/// Why one rank was not read: a code, one line for a person, and the detail.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct NotRead {
    /// The machine-readable word.
    pub code: ReasonCode,
    /// The reason, one line, for a person (the same for the same cause everywhere).
    pub text: String,
    /// [`ReasonCode::Denied`]: what the kernel refused, and why.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub denial: Option<AccessDenial>,
    /// The node it runs on, when that is part of the reason (remote, an agent's failure).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub host: Option<String>,
    /// [`ReasonCode::MissingTypes`]: the MPI types not found.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Vec::is_empty")
    )]
    pub missing_types: Vec<String>,
}

impl NotRead {
    /// A reason of `code` with `text`.
    pub fn new(code: ReasonCode, text: impl Into<String>) -> Self {
        NotRead {
            code,
            text: one_line(&text.into()),
            denial: None,
            host: None,
            missing_types: Vec::new(),
        }
    }

    /// The kernel refused this tool the process: code [`ReasonCode::Denied`], the text the
    /// denial's own (the same wherever the refusal was met).
    pub fn denied(denial: AccessDenial) -> Self {
        NotRead {
            denial: Some(denial.clone()),
            ..NotRead::new(
                ReasonCode::Denied,
                format!("refused by the kernel: {denial}"),
            )
        }
    }

    /// On node `host`.
    pub fn on(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// With these MPI types missing.
    pub fn with_missing_types(mut self, types: Vec<String>) -> Self {
        self.missing_types = types;
        self
    }

    /// Whether the rank was not read because it runs on another node no agent read.
    pub fn is_remote(&self) -> bool {
        self.code == ReasonCode::Remote
    }
}

impl fmt::Display for NotRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `text` on one line: line breaks and other control characters become spaces, and it is cut
/// at 1,000 characters (a peer's text is bounded too).
fn one_line(text: &str) -> String {
    const MAX: usize = 1000;
    let mut s: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(MAX)
        .collect();
    if text.chars().count() > MAX {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_code_reads_back_as_itself_and_unknown_words_are_kept() {
        for c in ReasonCode::KNOWN {
            assert_eq!(ReasonCode::from(c.as_str().to_string()), c);
        }
        let newer = ReasonCode::from("held_by_a_newer_thing".to_string());
        assert_eq!(newer, ReasonCode::Other("held_by_a_newer_thing".into()));
        assert_eq!(newer.as_str(), "held_by_a_newer_thing");
        // The words are distinct.
        let mut words: Vec<&str> = ReasonCode::KNOWN.iter().map(ReasonCode::as_str).collect();
        words.sort_unstable();
        words.dedup();
        assert_eq!(words.len(), ReasonCode::KNOWN.len());
    }

    #[test]
    fn text_is_one_bounded_line() {
        let r = NotRead::new(ReasonCode::ReadFailed, "a\nb\r\tc");
        assert_eq!(r.text, "a b  c");
        let long = NotRead::new(ReasonCode::ReadFailed, "x".repeat(5000));
        assert_eq!(long.text.chars().count(), 1001);
    }

    #[test]
    fn a_denial_is_its_own_text_wherever_it_is_met() {
        let d = AccessDenial::TracedBy {
            pid: 9,
            name: "gdb".into(),
        };
        let r = NotRead::denied(d.clone());
        assert_eq!(r.code, ReasonCode::Denied);
        assert_eq!(r.denial, Some(d));
        assert!(r.text.contains("already traced by pid 9 (gdb)"), "{r}");
    }

    #[cfg(feature = "serde")]
    #[test]
    fn the_wire_form_keeps_an_unknown_code_and_its_text() {
        let json = r#"{"code":"held_by_a_newer_thing","text":"held by something new"}"#;
        let r: NotRead = serde_json::from_str(json).unwrap();
        assert_eq!(r.code.as_str(), "held_by_a_newer_thing");
        assert_eq!(r.text, "held by something new");
        let back = serde_json::to_string(&r).unwrap();
        assert_eq!(back, json);
    }
}
