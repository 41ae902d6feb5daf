//! The interpreter's state, walked: interpreters, thread states, frames, code objects.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use mpir_types::DataModel;
use mpir_types::stacks::{PythonFrame, PythonProblem, PythonStack};

use super::layout::{self, FrameModel, Layout};
use super::linetable;
use crate::{Memory, MemoryExt, SymbolLookup};

/// Interpreters (sub-interpreters included) read at most.
pub const MAX_INTERPRETERS: usize = 256;
/// Thread states read per interpreter at most.
pub const MAX_THREADS: usize = 4096;
/// Frames read per thread at most (CPython's default recursion limit is 1,000).
pub const MAX_FRAMES: usize = 4096;
/// Characters of a name or file name kept; a longer one is cut and ends in `…`.
pub const MAX_NAME: u64 = 1024;
/// Bytes of a code object's line table read at most; a longer table is refused as corrupt.
pub const MAX_LINE_TABLE: u64 = 1 << 20;

/// A CPython interpreter found in a process, its layout chosen by the version its image
/// declares ([module docs](super)).
#[derive(Debug, Clone)]
pub struct Interpreter {
    layout: &'static Layout,
    version: String,
    runtime: u64,
    module: Arc<str>,
    types: Types,
}

/// Addresses of the type objects the image exports: what a decoded object's `ob_type` must be.
#[derive(Debug, Clone, Copy)]
struct Types {
    code: u64,
    unicode: u64,
    bytes: u64,
    /// `PyFrame_Type`: checked on 3.9/3.10's frame objects.
    frame: Option<u64>,
}

fn unproven(version: &str, why: impl Into<String>) -> PythonProblem {
    PythonProblem::Unproven {
        version: version.to_string(),
        why: why.into(),
    }
}

impl Interpreter {
    /// The CPython interpreter of `target`: `Ok(None)` when no image exports `_PyRuntime` (no
    /// Python runs there); an error when one does but its version has no layout, or its
    /// facts contradict each other. Reads symbols and at most one word of memory
    /// (`Py_Version`); the layout is proven by [`stacks`](Self::stacks), on every read.
    pub fn find<T: SymbolLookup + Memory + ?Sized>(
        target: &T,
    ) -> Result<Option<Interpreter>, PythonProblem> {
        let Ok(Some(runtime)) = target.symbol("_PyRuntime") else {
            return Ok(None);
        };
        let image = runtime.image.clone();
        // A symbol of the same image as `_PyRuntime` (any image when images are unknown).
        let same = |name: &str| {
            target
                .symbol(name)
                .ok()
                .flatten()
                .filter(|s| image.is_none() || s.image == image)
        };
        let minor = match same("Py_Version") {
            Some(v) => {
                let hex = target.read_uint(v.address, 4, "Py_Version").map_err(|_| {
                    PythonProblem::Unreadable {
                        what: "Py_Version".into(),
                        address: v.address,
                    }
                })?;
                let (major, minor) = ((hex >> 24) & 0xff, (hex >> 16) & 0xff);
                if major != 3 {
                    return Err(PythonProblem::UnknownVersion {
                        found: format!("{major}.{minor} (Py_Version {hex:#x})"),
                    });
                }
                minor
            }
            None if same("Py_IsNone").is_some() => 10,
            None if same("PyModule_AddType").is_some() => 9,
            None => {
                return Err(PythonProblem::UnknownVersion {
                    found: "older than 3.9".into(),
                });
            }
        };
        let version = format!("3.{minor}");
        let layout = u8::try_from(minor)
            .ok()
            .and_then(layout::for_minor)
            .ok_or_else(|| PythonProblem::UnknownVersion {
                found: version.clone(),
            })?;
        if target.data_model() != DataModel::LP64 {
            return Err(unproven(
                &version,
                "only 64-bit little-endian interpreters are read",
            ));
        }
        let ty = |name: &str| {
            same(name)
                .map(|s| s.address)
                .ok_or_else(|| unproven(&version, format!("the image exports no {name}")))
        };
        let types = Types {
            code: ty("PyCode_Type")?,
            unicode: ty("PyUnicode_Type")?,
            bytes: ty("PyBytes_Type")?,
            frame: match layout.frames {
                FrameModel::Object { .. } => Some(ty("PyFrame_Type")?),
                _ => None,
            },
        };
        Ok(Some(Interpreter {
            layout,
            version,
            runtime: runtime.address,
            module: image.unwrap_or_default().into(),
            types,
        }))
    }

    /// The version (`3.11`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The path of the image holding the interpreter (the executable or `libpython3.X.so`),
    /// as the unwinder names modules.
    pub fn module(&self) -> &str {
        &self.module
    }

    /// Every Python thread's frames, innermost first. `threads` are the process's threads:
    /// each its tid and, when its registers were read, its thread pointer
    /// ([`Registers::thread_pointer`](crate::unwind::Registers::thread_pointer)). A thread
    /// state names its thread by tid (3.11+, `native_thread_id`) or by `pthread_t` (3.9, 3.10:
    /// glibc's `pthread_t` is the thread pointer). At least one thread state must name one of
    /// `threads` (the layout's proof) unless none exists yet (an interpreter not
    /// initialised: no stacks); thread states naming no thread of the process are left out.
    /// An error is about the whole interpreter; a thread whose own chain breaks keeps the
    /// frames read, with the problem.
    pub fn stacks<M: Memory + ?Sized>(
        &self,
        memory: &M,
        threads: &[(u32, Option<u64>)],
    ) -> Result<Vec<PythonStack>, PythonProblem> {
        let mut walk = Walk {
            py: self,
            memory,
            codes: HashMap::new(),
            strings: HashMap::new(),
        };
        walk.all(threads)
    }
}

/// Per-call caches: code objects and strings by address (valid only while the process stays
/// stopped).
struct Walk<'a, M: ?Sized> {
    py: &'a Interpreter,
    memory: &'a M,
    codes: HashMap<u64, Arc<Code>>,
    strings: HashMap<u64, Arc<str>>,
}

/// What a code object gives a frame.
#[derive(Debug)]
struct Code {
    function: Arc<str>,
    file: Arc<str>,
    firstlineno: i32,
    table: Vec<u8>,
    firsttraceable: i64,
}

/// Part of an object: its bytes from offset `from`.
struct Span {
    from: u64,
    buf: Vec<u8>,
}

impl Span {
    /// The word at `offset` of the object.
    fn word(&self, offset: u64) -> u64 {
        word(&self.buf, offset.wrapping_sub(self.from))
    }
}

fn word(buf: &[u8], offset: u64) -> u64 {
    let at = usize::try_from(offset).unwrap_or(usize::MAX);
    buf.get(at..at.saturating_add(8))
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_le_bytes)
        .unwrap_or(0)
}

fn int32(buf: &[u8], offset: u64) -> i32 {
    let at = usize::try_from(offset).unwrap_or(usize::MAX);
    buf.get(at..at.saturating_add(4))
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(i32::from_le_bytes)
        .unwrap_or(0)
}

fn byte(buf: &[u8], offset: u64) -> u8 {
    usize::try_from(offset)
        .ok()
        .and_then(|o| buf.get(o))
        .copied()
        .unwrap_or(0)
}

impl<M: Memory + ?Sized> Walk<'_, M> {
    fn layout(&self) -> &'static Layout {
        self.py.layout
    }

    fn read(&self, what: &str, address: u64, len: u64) -> Result<Vec<u8>, PythonProblem> {
        if address == 0 {
            return Err(PythonProblem::Corrupt {
                what: what.to_string(),
                address,
                why: "NULL pointer".into(),
            });
        }
        self.memory
            .read_vec(address, len)
            .map_err(|_| PythonProblem::Unreadable {
                what: what.to_string(),
                address,
            })
    }

    /// The words at `offsets` of the object at `address`, in one read of the span they cover.
    fn span(&self, what: &str, address: u64, offsets: &[u64]) -> Result<Span, PythonProblem> {
        let from = offsets.iter().copied().min().unwrap_or(0);
        let to = offsets.iter().copied().max().unwrap_or(0) + 8;
        let buf = self.read(what, address.wrapping_add(from), to - from)?;
        Ok(Span { from, buf })
    }

    fn pointer(&self, what: &str, address: u64) -> Result<u64, PythonProblem> {
        self.read(what, address, 8).map(|b| word(&b, 0))
    }

    /// `ob_type` of the object in `buf` must be `expected`.
    fn typed(
        &self,
        what: &str,
        address: u64,
        buf: &[u8],
        expected: u64,
        type_name: &str,
    ) -> Result<(), PythonProblem> {
        let found = word(buf, self.layout().object_type);
        if found == expected {
            return Ok(());
        }
        Err(PythonProblem::Corrupt {
            what: what.to_string(),
            address,
            why: format!("its type is {found:#x}, not {type_name} ({expected:#x})"),
        })
    }

    fn all(&mut self, threads: &[(u32, Option<u64>)]) -> Result<Vec<PythonStack>, PythonProblem> {
        let l = self.layout();
        let version = self.py.version.clone();
        let mut interp = self.pointer(
            "the interpreter list",
            self.py.runtime.wrapping_add(l.runtime_interpreters_head),
        )?;
        // The words read of each interpreter and thread state (3.13's interpreter keeps its
        // two 7 KB into the struct: only the span between them is read).
        let interp_words = [l.interp_next, l.interp_threads_head];
        let mut tstate_words = vec![
            l.tstate_next,
            l.tstate_interp,
            l.tstate_thread_id,
            l.tstate_frame,
        ];
        tstate_words.extend(l.tstate_native_thread_id);
        let mut out = Vec::new();
        let mut seen_interps = HashSet::new();
        let mut states = 0usize;
        let mut named = 0usize;
        while interp != 0 {
            if !seen_interps.insert(interp) || seen_interps.len() > MAX_INTERPRETERS {
                return Err(PythonProblem::Corrupt {
                    what: "the interpreter list".into(),
                    address: interp,
                    why: format!("loops or holds more than {MAX_INTERPRETERS} interpreters"),
                });
            }
            let ibuf = self.span("an interpreter state", interp, &interp_words)?;
            let mut tstate = ibuf.word(l.interp_threads_head);
            let mut seen = HashSet::new();
            while tstate != 0 {
                if !seen.insert(tstate) || seen.len() > MAX_THREADS {
                    return Err(PythonProblem::Corrupt {
                        what: "the thread state list".into(),
                        address: tstate,
                        why: format!("loops or holds more than {MAX_THREADS} threads"),
                    });
                }
                let tbuf = self.span("a thread state", tstate, &tstate_words)?;
                let back = tbuf.word(l.tstate_interp);
                if back != interp {
                    return Err(unproven(
                        &version,
                        format!(
                            "thread state {tstate:#x} names interpreter {back:#x}, not {interp:#x}"
                        ),
                    ));
                }
                states += 1;
                let tid = match l.tstate_native_thread_id {
                    Some(o) => {
                        let native = tbuf.word(o);
                        u32::try_from(native)
                            .ok()
                            .filter(|t| threads.iter().any(|(tid, _)| tid == t))
                    }
                    None => {
                        let pthread = tbuf.word(l.tstate_thread_id);
                        threads
                            .iter()
                            .find(|(_, tp)| pthread != 0 && *tp == Some(pthread))
                            .map(|(tid, _)| *tid)
                    }
                };
                if let Some(tid) = tid {
                    named += 1;
                    let first = tbuf.word(l.tstate_frame);
                    out.push(self.thread(tid, first));
                }
                tstate = tbuf.word(l.tstate_next);
            }
            interp = ibuf.word(l.interp_next);
        }
        if states > 0 && named == 0 {
            return Err(unproven(
                &version,
                format!("none of its {states} thread states names a thread of the process"),
            ));
        }
        Ok(out)
    }

    /// One thread's frames from the thread state's frame word.
    fn thread(&mut self, tid: u32, first: u64) -> PythonStack {
        let mut frames = Vec::new();
        let problem = self.frames(first, &mut frames).err();
        let stack = PythonStack::new(tid, frames);
        match problem {
            Some(p) => stack.with_problem(p),
            None => stack,
        }
    }

    fn frames(&mut self, first: u64, out: &mut Vec<PythonFrame>) -> Result<(), PythonProblem> {
        let l = self.layout();
        let mut frame = match l.frames {
            // 3.11/3.12: the thread state's word is the `_PyCFrame`; its `current_frame` is
            // the innermost frame.
            FrameModel::Interpreter {
                cframe_current_frame,
            } => {
                if first == 0 {
                    return Ok(());
                }
                self.pointer("a C frame", first.wrapping_add(cframe_current_frame))?
            }
            _ => first,
        };
        let mut seen = HashSet::new();
        while frame != 0 {
            if !seen.insert(frame) {
                return Err(PythonProblem::Cycle { address: frame });
            }
            if seen.len() > MAX_FRAMES {
                return Err(PythonProblem::TooDeep { limit: MAX_FRAMES });
            }
            let buf = self.read("a frame", frame, l.frame_size)?;
            let back = word(&buf, l.frame_back);
            match l.frames {
                FrameModel::Object { lasti_in_units } => {
                    if let Some(t) = self.py.types.frame {
                        self.typed("a frame object", frame, &buf, t, "PyFrame_Type")?;
                    }
                    let code = self.code(word(&buf, l.frame_code))?;
                    let lasti = i64::from(int32(&buf, l.frame_lasti));
                    let line = if lasti_in_units {
                        linetable::linetable310_line(
                            code.firstlineno,
                            &code.table,
                            lasti.saturating_mul(2),
                        )
                    } else {
                        linetable::lnotab_line(code.firstlineno, &code.table, lasti)
                    };
                    out.push(PythonFrame::new(
                        code.function.clone(),
                        code.file.clone(),
                        line.unwrap_or(0),
                        true,
                    ));
                }
                FrameModel::Interpreter { .. } | FrameModel::Interpreter313 => {
                    let owner = l.frame_owner.map(|o| byte(&buf, o));
                    if owner.is_some() && owner == l.owned_by_cstack {
                        // The marker under the first frame of a native evaluation call.
                        if let Some(last) = out.last_mut() {
                            last.ends_call = true;
                        }
                        frame = back;
                        continue;
                    }
                    let code_at = word(&buf, l.frame_code);
                    let code = self.code(code_at)?;
                    let start = code_at.wrapping_add(l.code_code);
                    let ip = word(&buf, l.frame_lasti);
                    let index = (i128::from(ip) - i128::from(start)) / 2;
                    let index = i64::try_from(index).unwrap_or(i64::MIN);
                    let generator = owner.is_some() && owner == l.owned_by_generator;
                    // A frame being set up has not run its first traceable instruction yet.
                    let incomplete = !generator && index < code.firsttraceable;
                    let entry = l.frame_is_entry.is_some_and(|o| byte(&buf, o) != 0);
                    if !incomplete {
                        // 3.11 and 3.12 point at the last instruction started, 3.13 at
                        // the one running: both are the instruction whose line is shown.
                        let line = linetable::locations_line(code.firstlineno, &code.table, index);
                        out.push(PythonFrame::new(
                            code.function.clone(),
                            code.file.clone(),
                            line.unwrap_or(0),
                            entry,
                        ));
                    }
                }
            }
            frame = back;
        }
        Ok(())
    }

    fn code(&mut self, address: u64) -> Result<Arc<Code>, PythonProblem> {
        if let Some(c) = self.codes.get(&address) {
            return Ok(Arc::clone(c));
        }
        let l = self.layout();
        let buf = self.read("a code object", address, l.code_size)?;
        self.typed(
            "a code object",
            address,
            &buf,
            self.py.types.code,
            "PyCode_Type",
        )?;
        let name_at = word(&buf, l.code_qualname.unwrap_or(l.code_name));
        let function = self.string("a code object's name", name_at)?;
        let file = self.string("a code object's file name", word(&buf, l.code_filename))?;
        let table = self.bytes("a code object's line table", word(&buf, l.code_linetable))?;
        let code = Arc::new(Code {
            function,
            file,
            firstlineno: int32(&buf, l.code_firstlineno),
            table,
            firsttraceable: l
                .code_firsttraceable
                .map_or(0, |o| i64::from(int32(&buf, o))),
        });
        self.codes.insert(address, Arc::clone(&code));
        Ok(code)
    }

    fn string(&mut self, what: &str, address: u64) -> Result<Arc<str>, PythonProblem> {
        if let Some(s) = self.strings.get(&address) {
            return Ok(Arc::clone(s));
        }
        let l = self.layout();
        // The smallest header (an ASCII string's): a short ASCII name may end right after it.
        let head = self.read(what, address, l.ascii_size)?;
        self.typed(
            what,
            address,
            &head,
            self.py.types.unicode,
            "PyUnicode_Type",
        )?;
        let corrupt = |why: String| PythonProblem::Corrupt {
            what: what.to_string(),
            address,
            why,
        };
        let length = word(&head, l.unicode_length);
        if length > i64::MAX as u64 {
            return Err(corrupt(format!("length {length}")));
        }
        let state = int32(&head, l.unicode_state) as u32;
        let kind = (state >> l.state_kind_shift) & 7;
        let compact = (state >> l.state_compact_shift) & 1 == 1;
        let ascii = (state >> l.state_ascii_shift) & 1 == 1;
        if !compact {
            return Err(corrupt("not a compact string".into()));
        }
        let (data, width) = match (ascii, kind) {
            (true, 1) => (address.wrapping_add(l.ascii_size), 1u64),
            (false, 1 | 2 | 4) => (address.wrapping_add(l.compact_size), u64::from(kind)),
            _ => return Err(corrupt(format!("string kind {kind}"))),
        };
        let kept = length.min(MAX_NAME);
        let bytes = if kept == 0 {
            Vec::new()
        } else {
            self.read(what, data, kept * width)?
        };
        let mut text: String = match width {
            1 if ascii => String::from_utf8_lossy(&bytes).into_owned(),
            1 => bytes.iter().map(|&b| char::from(b)).collect(),
            2 => bytes
                .chunks_exact(2)
                .map(|c| u32::from(u16::from_le_bytes([c[0], c[1]])))
                .map(|u| char::from_u32(u).unwrap_or('\u{fffd}'))
                .collect(),
            _ => bytes
                .chunks_exact(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .map(|u| char::from_u32(u).unwrap_or('\u{fffd}'))
                .collect(),
        };
        if length > kept {
            text.push('…');
        }
        let s: Arc<str> = text.into();
        self.strings.insert(address, Arc::clone(&s));
        Ok(s)
    }

    fn bytes(&self, what: &str, address: u64) -> Result<Vec<u8>, PythonProblem> {
        let l = self.layout();
        let head = self.read(what, address, l.bytes_sval)?;
        self.typed(what, address, &head, self.py.types.bytes, "PyBytes_Type")?;
        let size = word(&head, l.bytes_size);
        if size > MAX_LINE_TABLE {
            return Err(PythonProblem::Corrupt {
                what: what.to_string(),
                address,
                why: format!("{size} bytes (at most {MAX_LINE_TABLE} are read)"),
            });
        }
        if size == 0 {
            return Ok(Vec::new());
        }
        self.read(what, address.wrapping_add(l.bytes_sval), size)
    }
}
