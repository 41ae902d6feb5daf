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
