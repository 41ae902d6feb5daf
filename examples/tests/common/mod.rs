//! What the library examples' tests share: the real stacks' locations.
#![allow(dead_code, unreachable_pub)] // each test file uses part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The Open MPI types sidecar: `$MPIR_OMPI_TYPES_SIDECAR`, else what the project script prints
/// (it builds and caches the object); `None` when neither gives a file.
pub fn ompi_sidecar() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MPIR_OMPI_TYPES_SIDECAR") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/openmpi-types-sidecar.sh");
    let out = Command::new(script)
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.lines()
        .last()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
}
