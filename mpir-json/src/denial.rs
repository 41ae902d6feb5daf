//! The kernel's refusal of a rank, as every document gives it: the same `code`, `text` and
//! `remedy` in queues, stacks and deadlock documents (and the bindings, which emit them).

use mpir_types::access::AccessDenial;
use serde::Serialize;

/// A refusal: its stable code and detail fields (`pid` and `name` of another tracer, Yama's
/// `scope`, the two uids), the reason in words and what to do.
#[derive(Serialize, Clone, Debug)]
pub struct DenialOut {
    /// `code` and the detail fields.
    #[serde(flatten)]
    pub detail: AccessDenial,
    /// The reason in words.
    pub text: String,
    /// What the user can do.
    pub remedy: String,
}

impl DenialOut {
    /// The document of `denial`.
    pub fn of(denial: &AccessDenial) -> Self {
        DenialOut {
            detail: denial.clone(),
            text: denial.to_string(),
            remedy: denial.remedy(),
        }
    }
}

/// A rank read through its cooperative channel, because the kernel refused this tool the
/// process: every document lists these, so that no reader mistakes them for ranks read (and
/// stopped) as usual.
#[derive(Serialize, Clone, Debug)]
pub struct CooperativeOut {
    /// The rank.
    pub rank: Option<u64>,
    /// Its pid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Why the channel stood in.
    pub denial: DenialOut,
}

/// The job's table, built from its ranks' announcements on their channels because the kernel
/// refused this tool the starter.
#[derive(Serialize, Clone, Debug)]
pub struct AnnouncedOut {
    /// The starter named.
    pub starter: u32,
    /// Why its table could not be read.
    pub denial: DenialOut,
}

impl AnnouncedOut {
    /// The document of `a`.
    pub fn of(a: &mpir_session::Announced) -> Self {
        AnnouncedOut {
            starter: a.starter,
            denial: DenialOut::of(&a.denial),
        }
    }
}

/// Why a rank was not read, as every document gives it (`why`): the one vocabulary of
/// [`mpir_types::unread`] — the same `code` and `text` for the same cause in queues, stacks and
/// deadlock documents, whichever node the rank runs on.
#[derive(Serialize, Clone, Debug)]
pub struct WhyOut {
    /// The stable word (`denied`, `remote`, `exited`, `agent_timed_out`…; a newer agent's word
    /// is passed on as it came).
    pub code: String,
    /// The reason, one line.
    pub text: String,
    /// `denied`: the kernel's refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denial: Option<DenialOut>,
    /// The node, when it is part of the reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// `missing_types`: the MPI types not found.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_types: Vec<String>,
}

impl WhyOut {
    /// The document of `why`.
    pub fn of(why: &mpir_types::unread::NotRead) -> Self {
        WhyOut {
            code: why.code.as_str().to_string(),
            text: why.text.clone(),
            denial: why.denial.as_ref().map(DenialOut::of),
            host: why.host.clone(),
            missing_types: why.missing_types.clone(),
        }
    }
}
