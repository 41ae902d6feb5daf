//! How `mpir` reports a failure: one line with the causes (`mpir: error: what: because: …`),
//! and a hint when the error's type says what to do. Hints are chosen by walking the cause
//! chain and downcasting each cause to the library's error types, never from the text.

use crate::demo_files::DemoFilesError;

/// The error and its causes on one line. A cause whose text its parent already shows (an
/// error that prints its source as well as returning it) is not repeated.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cause = c.source();
    }
    s
}

/// What to do about `e`, when one of its causes is of a type that says.
pub(crate) fn hint(e: &anyhow::Error) -> Option<&'static str> {
    e.chain().find_map(|cause| {
        if let Some(d) = cause.downcast_ref::<DemoFilesError>() {
            return match d {
                DemoFilesError::NotPrivate { .. } => Some(
                    "mpir runs the demo's programs only from a directory of its own: remove that \
                     directory (mpir recreates it), or point XDG_CACHE_HOME elsewhere",
                ),
                DemoFilesError::NotInDemoDir { .. } => Some("unset MPIR_DEMO_DIR"),
                _ => None,
            };
        }
        if let Some(m) = cause.downcast_ref::<mpir_mqd::MqdError>() {
            return dll_lacks_types(m).then_some(
                "the MPI library may lack debug information: give a types sidecar with --types \
                 (scripts/openmpi-types-sidecar.sh builds one for Open MPI)",
            );
        }
        None
    })
}

/// Whether the MPI's message-queue DLL failed because the MPI library's types are unknown to
/// it (a library without debug information).
///
/// TEXT MATCH, KEPT UNTIL mpir-mqd EXPOSES A TYPED FAULT: `MqdError::Dll` carries the DLL's
/// callback faults as strings only, so this looks for "type" in the error's text, as the tool
/// always did. Replace it with a match on the typed "missing type" fault once mpir-mqd has one.
pub(crate) fn dll_lacks_types(e: &mpir_mqd::MqdError) -> bool {
    chain(e).contains("type")
}

/// The line `mpir` prints for a failure: the error with its causes, and the hint if any.
pub(crate) fn report(e: &anyhow::Error) -> String {
    let mut line = format!("mpir: error: {}", chain(e.as_ref()));
    if let Some(h) = hint(e) {
        line.push_str(&format!(" (hint: {h})"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context as _;

    #[test]
    fn the_hint_comes_from_a_cause_s_type_under_any_context() {
        let e = Err::<(), _>(DemoFilesError::NotPrivate {
            path: "/x/mpir".into(),
            why: "is not owned by you",
        })
        .context("preparing the demo")
        .context("mpir demo")
        .unwrap_err();
        let line = report(&e);
        assert!(
            line.starts_with("mpir: error: mpir demo: preparing the demo: /x/mpir is not owned"),
            "{line}"
        );
        assert!(
            line.contains("(hint: mpir runs the demo's programs only"),
            "{line}"
        );
        // The same words in an error of another type give no hint.
        let other = anyhow::anyhow!("/x/mpir is not owned by you: it cannot hold programs");
        assert_eq!(hint(&other), None);
    }

    #[test]
    fn a_cause_printed_by_its_parent_is_not_repeated() {
        let io = std::io::Error::other("disk full");
        let e = anyhow::Error::new(io).context("writing x: disk full");
        assert_eq!(chain(e.as_ref()), "writing x: disk full");
    }
}
