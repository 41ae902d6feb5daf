//! The generator's library half: a [`LayoutSet`] from a "types object" — a DWARF-only object
//! compiled with `gcc -g` from a C file that includes one Open MPI build's configured headers
//! and declares one variable `mpir_sidecar_T` of each type `T` to describe
//! (`scripts/openmpi-layouts.sh` makes them; `mpir layouts generate` calls this).

use std::path::{Path, PathBuf};

use mpir_target::debuginfo::{DebugInfoError, ElfFile, TypeIndex};

use super::{LayoutSet, Release};

/// The prefix of the variables whose types a types object describes.
const VARIABLE_PREFIX: &str = "mpir_sidecar_";

/// Why no set could be generated from a types object.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GenerateError {
    /// The object or its DWARF cannot be read.
    #[error("types object {path}")]
    Object {
        /// The object.
        path: PathBuf,
        /// What failed.
        #[source]
        source: DebugInfoError,
    },
    /// The object declares no `mpir_sidecar_*` variable.
    #[error("types object {path} declares no {VARIABLE_PREFIX}* variable: not a types object")]
    Empty {
        /// The object.
        path: PathBuf,
    },
    /// A declared variable's type is not described.
    #[error("types object {path} does not describe type {name}")]
    Missing {
        /// The object.
        path: PathBuf,
        /// The type.
        name: String,
    },
}

/// Every type `object` declares a `mpir_sidecar_*` variable of, as a set of `release` under
/// `config` (`debug`: whether the configuration is a debug build), recording `source`.
pub fn generate(
    object: &Path,
    release: Release,
    config: &str,
    debug: bool,
    source: &str,
) -> Result<LayoutSet, GenerateError> {
    let wrap = |source| GenerateError::Object {
        path: object.to_path_buf(),
        source,
    };
    let elf = ElfFile::open(object).map_err(wrap)?;
    let model = elf.data_model();
    let index = TypeIndex::load(&elf, None).map_err(wrap)?;
    let mut names: Vec<String> = index
        .variable_names()
        .filter_map(|v| v.strip_prefix(VARIABLE_PREFIX).map(str::to_string))
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(GenerateError::Empty {
            path: object.to_path_buf(),
        });
    }
    let mut set = LayoutSet::new(release, config, model, debug, source);
    for name in names {
        let layout = index
            .named(&name)
            .map_err(wrap)?
            .ok_or_else(|| GenerateError::Missing {
                path: object.to_path_buf(),
                name: name.clone(),
            })?;
        set.insert(layout);
    }
    Ok(set)
}
