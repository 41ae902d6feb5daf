//! The unwinder's files in the [`SymbolStore`]: the source frames found at addresses of one
//! image, `<build-id>.frames` (the store's module docs say how they are validated).

use std::collections::HashMap;
use std::sync::Arc;

use super::cache::SourceFrame;
use crate::debuginfo::store::{MAX_ENTRIES, Reader, hex, put_id, put_string};
use crate::debuginfo::{StoreError, SymbolStore};

/// Frames one answer may hold (as the symboliser's own bound).
const MAX_FRAMES: usize = 64;
const MAGIC: &[u8; 8] = b"MPIRFRM1";
/// Frame flags in a file.
const HAS_FUNCTION: u8 = 1;
const HAS_LOCATION: u8 = 2;

/// The sizes of the files an image's answers came from: its DWARF file and its dwz
/// supplementary file (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Sizes {
    pub(super) dwarf: u64,
    pub(super) sup: u64,
}

/// One image's answers, as kept in its file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Stored {
    pub(super) build_id: Vec<u8>,
    pub(super) sizes: Sizes,
    pub(super) answers: HashMap<u64, Arc<[SourceFrame]>>,
}

fn file_name(build_id: &[u8]) -> String {
    format!("{}.frames", hex(build_id))
}

/// The answers `store` keeps for `build_id`, if they were made from DWARF files of `sizes`;
/// `Ok(None)` when there is no file or it was made from other files.
pub(super) fn load(
    store: &SymbolStore,
    build_id: &[u8],
    sizes: Sizes,
) -> Result<Option<Stored>, StoreError> {
    let stored = store.read_decoded(&file_name(build_id), |bytes| {
        let stored = Stored::decode(bytes)?;
        if stored.build_id != build_id {
            return Err("it names another build-id than its file name".into());
        }
        Ok(stored)
    })?;
    Ok(stored.filter(|s| s.sizes == sizes))
}

/// Writes `stored` as the file of its build-id.
pub(super) fn save(store: &SymbolStore, stored: &Stored) -> Result<(), StoreError> {
    store.write(&file_name(&stored.build_id), &stored.encode())
}

impl Stored {
    /// The file's bytes: magic, build-id, sizes, then each answer (address, frames), sorted by
    /// address; at most [`MAX_ENTRIES`] answers.
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        put_id(&mut out, &self.build_id);
        out.extend_from_slice(&self.sizes.dwarf.to_le_bytes());
        out.extend_from_slice(&self.sizes.sup.to_le_bytes());
        let mut answers: Vec<_> = self.answers.iter().collect();
        answers.sort_unstable_by_key(|(a, _)| **a);
        answers.truncate(MAX_ENTRIES);
        out.extend_from_slice(&(answers.len() as u32).to_le_bytes());
        for (address, frames) in answers {
            out.extend_from_slice(&address.to_le_bytes());
            let frames = &frames[..frames.len().min(MAX_FRAMES)];
            out.push(frames.len() as u8);
            for f in frames {
                let flags = (u8::from(f.function.is_some()) * HAS_FUNCTION)
                    | (u8::from(f.location.is_some()) * HAS_LOCATION);
                out.push(flags);
                if let Some(name) = &f.function {
                    put_string(&mut out, name);
                }
                if let Some((file, line)) = &f.location {
                    put_string(&mut out, file);
                    out.extend_from_slice(&line.to_le_bytes());
                }
            }
        }
        out
    }

    /// Parses what [`encode`](Stored::encode) wrote; anything else is refused with the
    /// reason and the byte offset.
    pub(super) fn decode(bytes: &[u8]) -> Result<Stored, String> {
        let mut r = Reader::new(bytes);
        if r.take(MAGIC.len())? != MAGIC {
            return Err("not a frames file of this version (wrong magic)".into());
        }
        let build_id = r.id()?.to_vec();
        let sizes = Sizes {
            dwarf: r.u64()?,
            sup: r.u64()?,
        };
        let count = r.u32()? as usize;
        if count > MAX_ENTRIES {
            return Err(format!("{count} answers, more than {MAX_ENTRIES}"));
        }
        let mut answers = HashMap::with_capacity(count.min(bytes.len() / 9));
        for _ in 0..count {
            let address = r.u64()?;
            let n = usize::from(r.u8()?);
            if n > MAX_FRAMES {
                return Err(format!(
                    "{n} frames at byte {}, more than {MAX_FRAMES}",
                    r.at - 1
                ));
            }
            let mut frames = Vec::with_capacity(n);
            for _ in 0..n {
                let flags = r.u8()?;
                if flags & !(HAS_FUNCTION | HAS_LOCATION) != 0 {
                    return Err(format!(
                        "unknown frame flags {flags:#x} at byte {}",
                        r.at - 1
                    ));
                }
                let function = if flags & HAS_FUNCTION != 0 {
                    Some(Arc::from(r.string()?))
                } else {
                    None
                };
                let location = if flags & HAS_LOCATION != 0 {
                    let file = Arc::from(r.string()?);
                    Some((file, r.u32()?))
                } else {
                    None
                };
                frames.push(SourceFrame { function, location });
            }
            if answers.insert(address, Arc::from(frames)).is_some() {
                return Err(format!("address {address:#x} answered twice"));
            }
        }
        r.end()?;
        Ok(Stored {
            build_id,
            sizes,
            answers,
        })
    }
}

#[cfg(test)]
#[path = "frames_store_tests.rs"]
mod tests;
