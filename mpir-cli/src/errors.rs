//! How `mpir` reports a failure: one line with the causes (`mpir: error: what: because: …`),
//! and a hint when the error's type says what to do. Hints are chosen by walking the cause
//! chain and downcasting each cause to the library's error types, never from the text.

use mpir_session::chain;

use mpir_demo::DemoFilesError;

/// What to do about `e`, when one of its causes is of a type that says.
pub(crate) fn hint(e: &anyhow::Error) -> Option<std::borrow::Cow<'static, str>> {
    e.chain().find_map(|cause| {
        // The kernel refused: the remedy that fits the reason.
        if let Some(d) = cause
            .downcast_ref::<mpir_target::TargetError>()
            .and_then(mpir_target::TargetError::denial)
        {
            return Some(d.remedy().into());
        }
        if let Some(d) = cause.downcast_ref::<DemoFilesError>() {
            return match d {
                DemoFilesError::NotPrivate { .. } => Some(
                    "mpir runs the demo's programs only from a directory of its own: remove that \
                     directory (mpir recreates it), or point XDG_CACHE_HOME elsewhere",
                ),
                DemoFilesError::NotInDemoDir { .. } => Some("unset MPIR_DEMO_DIR"),
                _ => None,
            }
            .map(Into::into);
        }
        // No shipped layout set fits, or the engine (native walker or the MPI's DLL) missed
        // the MPI's internal types.
        let refused = matches!(
            cause.downcast_ref::<mpir_mqd::MqdError>(),
            Some(mpir_mqd::MqdError::Layouts(_))
        ) || cause
            .downcast_ref::<mpir_mqd::layouts::LayoutRefusal>()
            .is_some();
        (refused || !mpir_mqd::MqdError::missing_types_in(cause).is_empty())
            .then_some(TYPES_HINT.into())
    })
}

/// What a user of the installed `mpir` can do when the MPI's internal types are missing and no
/// shipped layout set fits the library.
pub(crate) const TYPES_HINT: &str = "the MPI library has no debug information for its internal \
     types and no layout set shipped with mpir fits it (`mpir layouts` lists them): install the \
     library's debug symbols (its -dbgsym or -debuginfo package, --debug-dir DIR, or a \
     debuginfod server), or give --types FILE, an object compiled with `gcc -g -c` from a C \
     file that includes this build's internal headers (installed with --with-devel-headers) \
     and declares a variable of each type named";

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
