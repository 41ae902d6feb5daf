//! The functions of one image by address, as the unwinder and the symboliser ask for them
//! ([`Functions`]): answered from what an earlier run kept in the [`SymbolStore`]
//! (`<build-id>.functions`), else from the image's symbol tables, indexed on the first question
//! the store does not answer.
//!
//! Indexing the functions of the images a stack runs through was an eighth of a one-shot
//! `mpir stacks` with a warm store: libc's separate debug file alone names ~45,000 functions,
//! read, collected and sorted to name the one or two frames a rank has in libc. The answers
//! are fixed by the files they come from, so they are kept like the source frames are.
//!
//! **Validated.** A file is used only for the build-id it names and only while the image's file
//! and its separate debug file (whose symbol tables the answers come from) have the sizes
//! recorded with them: a stripped copy and its unstripped original share a build-id but not
//! their symbols, and a debug file installed or removed since changes the answers.
//! **Hostile files**: bounded and checked as the store's other files are (see
//! [`crate::debuginfo::store`]); a file that is not exactly what this version writes is
//! rejected whole, with the reason and the byte.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::symbols::{Code, FunctionIndex};
use crate::debuginfo::store::{MAX_ENTRIES, Reader, hex, put_id, put_string};
use crate::debuginfo::{ElfFile, StoreError, SymbolStore};

/// Answers remembered per image; past this, questions are answered but not remembered.
const MAX_REMEMBERED: usize = 1 << 16;
const MAGIC: &[u8; 8] = b"MPIRFUN1";

/// A question to an image's functions (link-time addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Query {
    /// The function containing an address.
    At(u64),
    /// The jump stub naming code no symbol names, at an address whose FDE starts at `body`.
    Stub { body: u64, at: u64 },
}

/// A function's name and the offset into it; `None`: no function.
pub(super) type Answer = Option<(Arc<str>, u64)>;

/// What identifies the files an image's answers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Key {
    pub(super) build_id: Vec<u8>,
    /// The image file's size.
    pub(super) image: u64,
    /// Its separate debug file's size (0: none).
    pub(super) debug: u64,
}

/// How the index is made when a question needs it.
enum Source {
    /// Made already (an image read from memory: the vDSO).
    Made,
    /// From the image's file and its separate debug file; jump stubs read from the image's
    /// code on x86.
    Files {
        elf: Arc<ElfFile>,
        debug: Option<Arc<ElfFile>>,
        x86: bool,
    },
}

/// The functions of one image (see the module docs).
pub(super) struct Functions {
    index: OnceLock<FunctionIndex>,
    source: Source,
    /// What the store's file is named by and checked against; `None`: never stored.
    key: Option<Key>,
    /// The store's answers, read on the first question.
    stored: OnceLock<HashMap<Query, Answer>>,
    /// Answers found from the index, not in `stored`.
    found: Mutex<HashMap<Query, Answer>>,
    /// How many of `found` are in the store already.
    saved: Mutex<usize>,
    /// Where answers are kept between runs.
    store: Option<SymbolStore>,
}

impl std::fmt::Debug for Functions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Functions")
            .field("indexed", &self.index.get().is_some())
            .field("key", &self.key)
            .field("stored", &self.stored.get().map(HashMap::len))
            .finish_non_exhaustive()
    }
}

impl Functions {
    /// An index made already, never stored.
    pub(super) fn made(index: FunctionIndex) -> Functions {
        Functions {
            index: OnceLock::from(index),
            source: Source::Made,
            key: None,
            stored: OnceLock::new(),
            found: Mutex::new(HashMap::new()),
            saved: Mutex::new(0),
            store: None,
        }
    }

    /// The functions of `elf` and its separate debug file `debug`, indexed when first needed
    /// (stubs read on x86); answered from and kept in `store` under the image's build-id when
    /// it has one.
    pub(super) fn of_files(
        elf: Arc<ElfFile>,
        debug: Option<Arc<ElfFile>>,
        x86: bool,
        store: Option<SymbolStore>,
    ) -> Self {
        let key = elf.build_id().filter(|id| !id.is_empty()).map(|id| Key {
            build_id: id.to_vec(),
            image: elf.file_len(),
            debug: debug.as_ref().map_or(0, |d| d.file_len()),
        });
        Functions {
            index: OnceLock::new(),
            source: Source::Files { elf, debug, x86 },
            key,
            stored: OnceLock::new(),
            found: Mutex::new(HashMap::new()),
            saved: Mutex::new(0),
            store,
        }
    }

    /// The function containing link-time address `address`, with the offset into it.
    pub(super) fn lookup(&self, address: u64) -> Answer {
        self.answer(Query::At(address), |index| {
            index.lookup(address).map(|(n, o)| (Arc::clone(n), o))
        })
    }

    /// The jump stub naming `address`, whose FDE starts at `body`
    /// ([`FunctionIndex::stub_body`]).
    pub(super) fn stub_body(&self, body: u64, address: u64) -> Answer {
        self.answer(Query::Stub { body, at: address }, |index| {
            index
                .stub_body(body, address)
                .map(|(n, o)| (Arc::clone(n), o))
        })
    }

    fn answer(&self, query: Query, ask: impl FnOnce(&FunctionIndex) -> Answer) -> Answer {
        if let Some(answer) = self.stored().get(&query) {
            return answer.clone();
        }
        let answer = ask(self.index());
        // Answers from symbol tables that could not be read are not findings to keep.
        let unread = match &self.source {
            Source::Files { elf, debug, .. } => {
                elf.symbols_unread() || debug.as_ref().is_some_and(|d| d.symbols_unread())
            }
            Source::Made => false,
        };
        if self.key.is_some() && !unread {
            let mut found = lock(&self.found);
            if found.len() < MAX_REMEMBERED {
                found.insert(query, answer.clone());
            }
        }
        answer
    }

    /// The store's answers for these files (read on first use; none without a store or key).
    fn stored(&self) -> &HashMap<Query, Answer> {
        self.stored.get_or_init(|| {
            let (Some(store), Some(key)) = (&self.store, &self.key) else {
                return HashMap::new();
            };
            match load(store, key) {
                Ok(answers) => answers.unwrap_or_default(),
                Err(e) => {
                    store.note(e);
                    HashMap::new()
                }
            }
        })
    }

    /// The index, made now when not yet.
    fn index(&self) -> &FunctionIndex {
        self.index.get_or_init(|| match &self.source {
            Source::Made => FunctionIndex::default(),
            Source::Files { elf, debug, x86 } => {
                let files = || std::iter::once(&**elf).chain(debug.as_deref());
                let segments = elf.segments();
                if !x86 {
                    FunctionIndex::build(files(), None::<Code<'_, &[u8]>>)
                } else if let Some(data) = elf.loaded_data() {
                    let data = &data[..];
                    FunctionIndex::build(files(), Some(Code { data, segments }))
                } else if let Some(file) = elf.reopen() {
                    let data = &object::ReadCache::new(file);
                    FunctionIndex::build(files(), Some(Code { data, segments }))
                } else {
                    FunctionIndex::build(files(), None::<Code<'_, &[u8]>>)
                }
            }
        })
    }

    /// Whether the index was made (a question the store did not answer).
    pub(super) fn indexed(&self) -> bool {
        self.index.get().is_some()
    }

    /// Writes the answers found since the store was read or last saved, with the store's own;
    /// whether a file was written. A failure is noted on the store.
    pub(super) fn save(&self) -> bool {
        let (Some(store), Some(key)) = (&self.store, &self.key) else {
            return false;
        };
        let found = lock(&self.found);
        let mut saved = lock(&self.saved);
        if found.len() <= *saved {
            return false;
        }
        *saved = found.len();
        let mut answers = self.stored.get().cloned().unwrap_or_default();
        answers.extend(found.iter().map(|(q, a)| (*q, a.clone())));
        match store.write(&file_name(&key.build_id), &encode(key, &answers)) {
            Ok(()) => true,
            Err(e) => {
                store.note(e);
                false
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn file_name(build_id: &[u8]) -> String {
    format!("{}.functions", hex(build_id))
}

/// The answers `store` keeps for `key`'s build-id, if they were made from files of `key`'s
/// sizes; `Ok(None)` when there is no file or it was made from other files.
pub(super) fn load(
    store: &SymbolStore,
    key: &Key,
) -> Result<Option<HashMap<Query, Answer>>, StoreError> {
    let stored = store.read_decoded(&file_name(&key.build_id), |bytes| {
        let (made_from, answers) = decode(bytes)?;
        if made_from.build_id != key.build_id {
            return Err("it names another build-id than its file name".into());
        }
        Ok((made_from, answers))
    })?;
    Ok(stored.and_then(|(made_from, answers)| (made_from == *key).then_some(answers)))
}

const AT: u8 = 0;
const STUB: u8 = 1;

/// The file's bytes: magic, build-id, the image's and debug file's sizes, then each answer
/// (kind, addresses, whether a function, its name and offset), sorted; at most
/// [`MAX_ENTRIES`] answers.
pub(super) fn encode(key: &Key, answers: &HashMap<Query, Answer>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    put_id(&mut out, &key.build_id);
    out.extend_from_slice(&key.image.to_le_bytes());
    out.extend_from_slice(&key.debug.to_le_bytes());
    let mut sorted: Vec<_> = answers.iter().collect();
    sorted.sort_unstable_by_key(|(q, _)| match q {
        Query::At(a) => (0, *a, 0),
        Query::Stub { body, at } => (1, *body, *at),
    });
    sorted.truncate(MAX_ENTRIES);
    out.extend_from_slice(&(sorted.len() as u32).to_le_bytes());
    for (query, answer) in sorted {
        match query {
            Query::At(a) => {
                out.push(AT);
                out.extend_from_slice(&a.to_le_bytes());
            }
            Query::Stub { body, at } => {
                out.push(STUB);
                out.extend_from_slice(&body.to_le_bytes());
                out.extend_from_slice(&at.to_le_bytes());
            }
        }
        match answer {
            Some((name, offset)) => {
                out.push(1);
                put_string(&mut out, name);
                out.extend_from_slice(&offset.to_le_bytes());
            }
            None => out.push(0),
        }
    }
    out
}

/// Parses what [`encode`] wrote; anything else is refused with the reason and the byte offset.
pub(super) fn decode(bytes: &[u8]) -> Result<(Key, HashMap<Query, Answer>), String> {
    let mut r = Reader::new(bytes);
    if r.take(MAGIC.len())? != MAGIC {
        return Err("not a functions file of this version (wrong magic)".into());
    }
    let key = Key {
        build_id: r.id()?.to_vec(),
        image: r.u64()?,
        debug: r.u64()?,
    };
    let count = r.u32()? as usize;
    if count > MAX_ENTRIES {
        return Err(format!("{count} answers, more than {MAX_ENTRIES}"));
    }
    let mut answers = HashMap::with_capacity(count.min(bytes.len() / 10));
    for _ in 0..count {
        let query = match r.u8()? {
            AT => Query::At(r.u64()?),
            STUB => Query::Stub {
                body: r.u64()?,
                at: r.u64()?,
            },
            k => return Err(format!("unknown question kind {k} at byte {}", r.at - 1)),
        };
        let answer = match r.u8()? {
            0 => None,
            1 => Some((Arc::from(r.string()?), r.u64()?)),
            f => return Err(format!("unknown answer flag {f} at byte {}", r.at - 1)),
        };
        if answers.insert(query, answer).is_some() {
            return Err(format!("{query:?} answered twice"));
        }
    }
    r.end()?;
    Ok((key, answers))
}

#[cfg(test)]
#[path = "functions_tests.rs"]
mod tests;
