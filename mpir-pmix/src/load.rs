//! Finding and loading libpmix at run time.

use crate::PmixError;
use crate::ffi::api::{self, Api, OpenError};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The major versions of OpenPMIx this crate speaks: the layouts of `types.rs` are those of the
/// PMIx "Stable ABI", checked against libpmix-dev 4.2.2's headers and used with OpenPMIx 5.0.11.
pub const SUPPORTED: &str = "OpenPMIx 4.x and 5.x";
const MAJORS: std::ops::RangeInclusive<u32> = 4..=5;

/// The system's libpmix, looked up by the dynamic linker.
const SYSTEM_SONAME: &str = "libpmix.so.2";

/// How to find libpmix at run time (never a build-time dependency).
///
/// Looked for in this order, and the first that exists decides (it is loaded, or the error
/// says why not; no other is tried then, so that a job is never spoken to by a library other
/// than the one expected):
/// 1. the launcher's own: the `libpmix.so*` mapped in `/proc/<launcher_pid>/maps`, else the one
///    of its installation (`<exe dir>/../lib/openmpi/`, `../lib/`, `../lib64/`);
/// 2. `path`;
/// 3. the system's (`libpmix.so.2` through the dynamic linker's search path).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct LoadOptions {
    /// The launcher (PMIx server) whose own libpmix is preferred.
    pub launcher_pid: Option<u32>,
    /// A libpmix given by the user.
    pub path: Option<PathBuf>,
}

impl LoadOptions {
    /// Prefer the libpmix of launcher `pid`.
    #[must_use]
    pub fn with_launcher_pid(mut self, pid: u32) -> Self {
        self.launcher_pid = Some(pid);
        self
    }
    /// Use the libpmix at `path` when the launcher's is not found.
    #[must_use]
    pub fn with_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.path = Some(path.into());
        self
    }
}

/// A loaded libpmix whose version this crate speaks. Cheap to clone; the library stays loaded
/// while a clone lives, and for the life of the process once a [`Tool`](crate::Tool) used it.
#[derive(Clone)]
pub struct Library {
    pub(crate) api: Arc<Api>,
    path: PathBuf,
    version: String,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Library")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish()
    }
}

impl Library {
    /// Finds and loads libpmix as `options` say.
    ///
    /// # Errors
    /// [`PmixError::NoLibrary`] when none is found; [`PmixError::Load`] when the one found does
    /// not load or lacks an entry point; [`PmixError::IncompatibleVersion`] when its major
    /// version is not one of [`SUPPORTED`] (both versions named).
    pub fn load(options: &LoadOptions) -> Result<Library, PmixError> {
        let mut tried = Vec::new();
        if let Some(pid) = options.launcher_pid {
            match launcher_library(pid) {
                Some(p) => return Library::load_path(&p),
                None => tried.push(format!(
                    "the libpmix of launcher {pid} (/proc/{pid}/maps, its installation)"
                )),
            }
        }
        if let Some(p) = &options.path {
            if p.exists() {
                return Library::load_path(p);
            }
            tried.push(p.display().to_string());
        }
        match Library::load_path(Path::new(SYSTEM_SONAME)) {
            Err(PmixError::Load { reason, .. }) => {
                tried.push(format!("the system's {SYSTEM_SONAME} ({reason})"));
                Err(PmixError::NoLibrary { tried })
            }
            other => other,
        }
    }

    /// Loads the libpmix at `path` (a file, or a soname for the dynamic linker).
    ///
    /// # Errors
    /// As for [`Library::load`].
    pub fn load_path(path: &Path) -> Result<Library, PmixError> {
        let load_err = |e: OpenError| PmixError::Load {
            path: path.to_path_buf(),
            reason: match e {
                OpenError::Dlopen(m) => m,
                OpenError::Symbol(s) => format!("it exports no {s}"),
            },
        };
        let opened = api::open(path).map_err(load_err)?;
        let version = opened.version.clone();
        if !major_of(&version).is_some_and(|m| MAJORS.contains(&m)) {
            return Err(PmixError::IncompatibleVersion {
                path: path.to_path_buf(),
                found: version,
                supported: SUPPORTED,
            });
        }
        let api = Api::resolve(opened).map_err(load_err)?;
        Ok(Library {
            api: Arc::new(api),
            path: path.to_path_buf(),
            version,
        })
    }

    /// What `PMIx_Get_version` says, e.g. `"OpenPMIx 5.0.11rc1 (PMIx Standard: 5.1, …)"`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The library's path as it was loaded (a soname for the system's).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The major version in a `PMIx_Get_version` string (`"OpenPMIx 5.0.11rc1 (…)"` → 5).
pub(crate) fn major_of(version: &str) -> Option<u32> {
    let rest = version.trim().strip_prefix("OpenPMIx")?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The libpmix a launcher uses: mapped in its address space, else beside its executable.
fn launcher_library(pid: u32) -> Option<PathBuf> {
    if let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
        for line in maps.lines() {
            // address perms offset dev inode path
            let Some(path) = line.split_whitespace().nth(5) else {
                continue;
            };
            let p = Path::new(path);
            if p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libpmix.so"))
                && p.is_file()
            {
                return Some(p.to_path_buf());
            }
        }
    }
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let prefix = exe.parent()?.parent()?;
    ["lib/openmpi", "lib", "lib64"]
        .iter()
        .map(|d| prefix.join(d).join(SYSTEM_SONAME))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_versions_are_read_from_pmix_get_version() {
        assert_eq!(
            major_of(
                "OpenPMIx 5.0.11rc1 (PMIx Standard: 5.1, Stable ABI: 5.0, Provisional ABI: 5.0)"
            ),
            Some(5)
        );
        assert_eq!(major_of("OpenPMIx 4.2.2rc2 (PMIx Standard: 4.2)"), Some(4));
        assert_eq!(major_of("OpenPMIx 10.1"), Some(10));
        assert_eq!(major_of("PMIx 5.0"), None);
        assert_eq!(major_of(""), None);
    }

    #[test]
    fn a_missing_user_path_falls_through_and_is_named() {
        let o = LoadOptions::default().with_path("/nonexistent/libpmix.so.2");
        match Library::load(&o) {
            // The system has a libpmix: it was loaded instead (the path did not exist).
            Ok(l) => assert_eq!(l.path(), Path::new(SYSTEM_SONAME)),
            Err(PmixError::NoLibrary { tried }) => {
                assert!(
                    tried
                        .iter()
                        .any(|t| t.contains("/nonexistent/libpmix.so.2")),
                    "{tried:?}"
                );
            }
            Err(e) => panic!("{e}"),
        }
    }
}
