//! Finding the MQD DLL for a process: the path the caller gives, else the rank image's
//! `MPIR_dll_name` (a char array, MPIR spec), else Open MPI's `mpimsgq_dll_locations` (a
//! NULL-terminated array of string pointers, often empty).

use std::path::{Path, PathBuf};

use mpir_target::{MemoryExt, Target};

use crate::error::{MqdError, Result};

/// Longest `MPIR_dll_name` we read (the array's size when the symbol gives none).
const MAX_NAME: u64 = 4096;
/// Most entries of `mpimsgq_dll_locations` we look at.
const MAX_LOCATIONS: u64 = 64;

/// Where a DLL path came from.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DllSource {
    /// The caller named it.
    Given,
    /// The process's `MPIR_dll_name`.
    MpirDllName,
    /// An entry of Open MPI's `mpimsgq_dll_locations`.
    MsgqDllLocations,
}

/// The MQD DLL for the process behind `target`: `given` if any (it must exist), else
/// `MPIR_dll_name`, else the first existing file in `mpimsgq_dll_locations`. Paths are files of
/// this machine (the debugger's), as the MPI wrote them. Every candidate tried is named in the
/// error when none is found.
pub fn discover_dll(target: &dyn Target, given: Option<&Path>) -> Result<(PathBuf, DllSource)> {
    if let Some(p) = given {
        return if p.is_file() {
            Ok((p.to_path_buf(), DllSource::Given))
        } else {
            Err(MqdError::NoDll {
                reason: format!("the given {} does not exist", p.display()),
            })
        };
    }
    let mut tried = Vec::new();
    match dll_name(target) {
        Ok(Some(name)) => {
            let p = PathBuf::from(&name);
            if p.is_file() {
                return Ok((p, DllSource::MpirDllName));
            }
            tried.push(format!("MPIR_dll_name = {name:?} (no such file)"));
        }
        Ok(None) => tried.push("no MPIR_dll_name (or empty)".into()),
        Err(e) => tried.push(format!("MPIR_dll_name unreadable: {e}")),
    }
    match locations(target) {
        Ok(list) if list.is_empty() => tried.push("mpimsgq_dll_locations absent or empty".into()),
        Ok(list) => {
            for name in list {
                let p = PathBuf::from(&name);
                if p.is_file() {
                    return Ok((p, DllSource::MsgqDllLocations));
                }
                tried.push(format!(
                    "mpimsgq_dll_locations entry {name:?} (no such file)"
                ));
            }
        }
        Err(e) => tried.push(format!("mpimsgq_dll_locations unreadable: {e}")),
    }
    Err(MqdError::NoDll {
        reason: tried.join("; "),
    })
}

fn text(bytes: Vec<u8>) -> Option<String> {
    let s = String::from_utf8_lossy(&bytes).trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// `MPIR_dll_name`: a char array, read up to its size (or [`MAX_NAME`]) and its first NUL.
fn dll_name(target: &dyn Target) -> mpir_target::Result<Option<String>> {
    let Some(sym) = target.symbol("MPIR_dll_name")? else {
        return Ok(None);
    };
    let max = if sym.size > 0 {
        sym.size.min(MAX_NAME)
    } else {
        MAX_NAME
    };
    Ok(text(target.read_c_string(sym.address, max)?))
}

/// `mpimsgq_dll_locations`: `char **`, NULL-terminated.
fn locations(target: &dyn Target) -> mpir_target::Result<Vec<String>> {
    let Some(sym) = target.symbol("mpimsgq_dll_locations")? else {
        return Ok(Vec::new());
    };
    let array = target.read_pointer(sym.address, "mpimsgq_dll_locations")?;
    let mut out = Vec::new();
    if array == 0 {
        return Ok(out);
    }
    let width = target.data_model().pointer_size();
    for i in 0..MAX_LOCATIONS {
        let at = array.wrapping_add(i * width);
        let p = target.read_pointer(at, "mpimsgq_dll_locations[i]")?;
        if p == 0 {
            break;
        }
        if let Some(s) = text(target.read_c_string(p, MAX_NAME)?) {
            out.push(s);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpir_target::{MockTarget, Symbol, SymbolKind};
    use mpir_types::DataModel;

    fn exe() -> String {
        std::env::current_exe().expect("exe").display().to_string()
    }

    #[test]
    fn mpir_dll_name_is_a_char_array_read_to_its_nul_and_size() {
        let path = exe();
        let mut b = MockTarget::builder(DataModel::ILP32_BE);
        // A 256-byte array holding the path, NUL, then garbage that must not be read as text.
        let mut bytes = path.clone().into_bytes();
        bytes.push(0);
        bytes.resize(256, b'X');
        let at = b.alloc_with(bytes);
        b.symbol(Symbol::new("MPIR_dll_name", at, 256, SymbolKind::Object));
        let t = b.build();
        assert_eq!(
            discover_dll(&t, None).expect("found"),
            (PathBuf::from(&path), DllSource::MpirDllName)
        );
        // The caller's path wins.
        assert_eq!(
            discover_dll(&t, Some(Path::new("/bin/sh")))
                .expect("given")
                .1,
            DllSource::Given
        );
    }

    #[test]
    fn open_mpi_locations_are_a_null_terminated_pointer_array() {
        let path = exe();
        let mut b = MockTarget::builder(DataModel::LP64_BE);
        // MPIR_dll_name names a file that does not exist; the locations list has a missing file,
        // then the real one, then NULL, then one that must not be looked at.
        let name = b.cstring("/nonexistent/libdbg.so");
        b.symbol(Symbol::new("MPIR_dll_name", name, 23, SymbolKind::Object));
        let s1 = b.cstring("/nonexistent/one.so");
        let s2 = b.cstring(&path);
        let s3 = b.cstring("/bin/sh");
        let array = b.alloc(32);
        b.write_with(array, 32, |v| {
            v.put_uint(0, 8, s1, "0")?;
            v.put_uint(8, 8, s2, "1")?;
            v.put_uint(16, 8, 0, "2")?;
            v.put_uint(24, 8, s3, "3")
        });
        b.pointer_variable("mpimsgq_dll_locations", array);
        let t = b.build();
        assert_eq!(
            discover_dll(&t, None).expect("found"),
            (PathBuf::from(&path), DllSource::MsgqDllLocations)
        );
    }

    #[test]
    fn nothing_found_names_every_candidate() {
        let mut b = MockTarget::builder(DataModel::LP64);
        let name = b.cstring("/nonexistent/libdbg.so");
        b.symbol(Symbol::new("MPIR_dll_name", name, 0, SymbolKind::Object));
        b.pointer_variable("mpimsgq_dll_locations", 0);
        let err = discover_dll(&b.build(), None).expect_err("none");
        let text = err.to_string();
        assert!(
            text.contains("\"/nonexistent/libdbg.so\" (no such file)"),
            "{text}"
        );
        assert!(
            text.contains("mpimsgq_dll_locations absent or empty"),
            "{text}"
        );
        // A garbage pointer array is an error in the message, not a panic.
        let mut b = MockTarget::builder(DataModel::LP64);
        b.pointer_variable("mpimsgq_dll_locations", 0xdead_0000);
        let err = discover_dll(&b.build(), None).expect_err("none");
        assert!(err.to_string().contains("unreadable"), "{err}");
    }
}
