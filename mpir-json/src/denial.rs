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
