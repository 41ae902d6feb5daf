//! Where CPython 3.9 to 3.13 keep what a stack reader follows: from the runtime to its
//! interpreters and their threads, from a thread to its innermost frame and along the frame
//! chain, and from a frame to its code object's names, first line, line table and bytecode —
//! with the layouts of the `bytes` and `str` objects those point at.
//!
//! Each [`Layout`] holds byte offsets, sizes and constants of one minor version, as that
//! version's own headers lay them out. The numbers were printed by the C probe
//! `mpir-target/tests/fixtures/python_layout_probe.c`, compiled against each version's installed
//! headers (internal ones included), and the test `mpir-target/tests/python_layouts.rs` compiles
//! and runs it again against every installed version and compares key by key
//! ([`Layout::fields`]).
//!
//! They fit x86_64 (LP64) release builds with the GIL, as Linux distributions and pyenv build
//! them. Free-threaded builds (3.13t, `Py_GIL_DISABLED`) and debug builds (`Py_DEBUG`,
//! `Py_TRACE_REFS`) lay objects out differently; validation elsewhere refuses them before these
//! numbers are used.
//!
//! ```
//! use mpir_target::python::layout::{for_minor, FrameModel};
//!
//! let py312 = for_minor(12).ok_or("3.12 is known")?;
//! assert!(matches!(py312.frames, FrameModel::Interpreter { .. }));
//! assert!(for_minor(8).is_none());
//! # Ok::<(), &str>(())
//! ```

/// How a version keeps its frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FrameModel {
    /// 3.9 and 3.10: heap `PyFrameObject`s at `tstate->frame`; `f_lasti` an `int` (3.9: a byte
    /// offset into `co_code`; 3.10: an index of 2-byte code units), `-1` before the first
    /// instruction.
    Object {
        /// Whether `f_lasti` counts 2-byte code units (3.10) rather than bytes (3.9).
        lasti_in_units: bool,
    },
    /// 3.11 and 3.12: `_PyInterpreterFrame`s reached through `tstate->cframe->current_frame`;
    /// `prev_instr` points at the code unit before the next instruction — the last instruction
    /// started, or an inline cache entry or jumped-over unit after it.
    Interpreter {
        /// Offset of `current_frame` in `_PyCFrame`.
        cframe_current_frame: u64,
    },
    /// 3.13: `_PyInterpreterFrame`s at `tstate->current_frame`; `instr_ptr` points at the
    /// instruction being executed (or about to begin).
    Interpreter313,
}

/// Byte offsets, sizes and constants of one CPython 3 minor version (x86_64, release, GIL).
///
/// Offsets are from the start of the named struct; a field that a version does not have is
/// `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Layout {
    /// The minor version, 9 to 13.
    pub minor: u8,
    /// How this version keeps its frames.
    pub frames: FrameModel,
    /// `_PyRuntimeState.interpreters.head`: the first `PyInterpreterState`.
    pub runtime_interpreters_head: u64,
    /// `PyInterpreterState.next`: the next interpreter.
    pub interp_next: u64,
    /// `PyInterpreterState.threads.head` (3.9 and 3.10: `tstate_head`): the first thread state.
    pub interp_threads_head: u64,
    /// `PyThreadState.next`: the next thread state of the same interpreter.
    pub tstate_next: u64,
    /// `PyThreadState.interp`: the thread's interpreter.
    pub tstate_interp: u64,
    /// `PyThreadState.thread_id`: the thread's `pthread_t`, which glibc makes the address of
    /// its thread control block: the thread pointer (x86_64's `fs_base`).
    pub tstate_thread_id: u64,
    /// `PyThreadState.native_thread_id`: the thread's kernel thread id (3.11 and later; 3.9 and
    /// 3.10 keep only the `pthread_t` in `thread_id`).
    pub tstate_native_thread_id: Option<u64>,
    /// Where a thread state points at its innermost frame: `frame` (3.9, 3.10; a
    /// `PyFrameObject`), `cframe` (3.11, 3.12; a `_PyCFrame` whose `current_frame` is the
    /// frame, see [`FrameModel::Interpreter`]) or `current_frame` (3.13).
    pub tstate_frame: u64,
    /// The frame's caller: `f_back` (3.9, 3.10) or `previous` (3.11 and later).
    pub frame_back: u64,
    /// The frame's code object: `f_code` (3.9 to 3.12) or `f_executable` (3.13; a code object
    /// or another object, so its type must be checked).
    pub frame_code: u64,
    /// The frame's position in its code: `f_lasti` (3.9, 3.10; an `int`), `prev_instr` (3.11,
    /// 3.12) or `instr_ptr` (3.13), both pointers to a code unit; see [`FrameModel`].
    pub frame_lasti: u64,
    /// `_PyInterpreterFrame.owner` (3.11 and later), a `char`: who owns the frame.
    pub frame_owner: Option<u64>,
    /// `_PyInterpreterFrame.is_entry` (3.11 only), a `bool`: whether the frame is the first
    /// one its `_PyCFrame` ran.
    pub frame_is_entry: Option<u64>,
    /// Size of `PyFrameObject` (3.9, 3.10) or of `_PyInterpreterFrame` with its one declared
    /// `localsplus` slot (3.11 and later).
    pub frame_size: u64,
    /// The `owner` value `FRAME_OWNED_BY_CSTACK` (3.12 and later): a shim frame of the C stack,
    /// not Python code.
    pub owned_by_cstack: Option<u8>,
    /// The `owner` value `FRAME_OWNED_BY_GENERATOR` (3.11 and later).
    pub owned_by_generator: Option<u8>,
    /// `PyCodeObject.co_filename`: a `str`.
    pub code_filename: u64,
    /// `PyCodeObject.co_name`: a `str`.
    pub code_name: u64,
    /// `PyCodeObject.co_qualname` (3.11 and later): a `str`.
    pub code_qualname: Option<u64>,
    /// `PyCodeObject.co_firstlineno`: an `int`.
    pub code_firstlineno: u64,
    /// The line table, a `bytes`: `co_lnotab` (3.9) or `co_linetable` (3.10 and later), each
    /// version in its own format.
    pub code_linetable: u64,
    /// The bytecode: `co_code` (3.9, 3.10), a pointer to a `bytes`, or `co_code_adaptive`
    /// (3.11 and later), the code units themselves inside the code object (see
    /// [`Layout::code_inline`]).
    pub code_code: u64,
    /// Whether [`Layout::code_code`] is the inline `co_code_adaptive` array (3.11 and later)
    /// rather than a pointer to a `bytes`.
    pub code_inline: bool,
    /// `PyCodeObject._co_firsttraceable` (3.11 and later), an `int`: the index in code units of
    /// the first instruction that runs the function's own code.
    pub code_firsttraceable: Option<u64>,
    /// Size of `PyCodeObject` as declared (3.11 and later: with the declared part of
    /// `co_code_adaptive`).
    pub code_size: u64,
    /// `PyBytesObject.ob_base.ob_size`: the length in bytes.
    pub bytes_size: u64,
    /// `PyBytesObject.ob_sval`: the first byte.
    pub bytes_sval: u64,
    /// `PyASCIIObject.length`: the length in code points.
    pub unicode_length: u64,
    /// `PyASCIIObject.state`: the 32-bit word of bit fields (`kind`, `compact`, `ascii`, …).
    pub unicode_state: u64,
    /// Size of `PyASCIIObject`: where a compact ASCII string's characters begin.
    pub ascii_size: u64,
    /// Size of `PyCompactUnicodeObject`: where a compact non-ASCII string's characters begin.
    pub compact_size: u64,
    /// Lowest bit of the 3-bit `kind` field (1, 2 or 4 bytes per character) in the state word.
    pub state_kind_shift: u8,
    /// Bit of the `compact` flag in the state word.
    pub state_compact_shift: u8,
    /// Bit of the `ascii` flag in the state word.
    pub state_ascii_shift: u8,
    /// `PyObject.ob_type`: the object's type.
    pub object_type: u64,
}

/// Width in bits of the `kind` field of a `str`'s state word, in every version here.
const STATE_KIND_BITS: u64 = 3;

impl Layout {
    /// Every field under the name the probe prints it with, in the probe's order; `None` where
    /// this version has no such field or constant.
    ///
    /// [`FrameModel`]'s offset is listed as `cframe_current_frame`, the two `owner` values as
    /// `frame_owned_by_cstack` and `frame_owned_by_generator`, and the width of the state
    /// word's `kind` field as `state_kind_bits`.
    pub fn fields(&self) -> Vec<(&'static str, Option<u64>)> {
        let cframe_current_frame = match self.frames {
            FrameModel::Interpreter {
                cframe_current_frame,
            } => Some(cframe_current_frame),
            FrameModel::Object { .. } | FrameModel::Interpreter313 => None,
        };
        vec![
            ("minor", Some(u64::from(self.minor))),
            (
                "runtime_interpreters_head",
                Some(self.runtime_interpreters_head),
            ),
            ("interp_next", Some(self.interp_next)),
            ("interp_threads_head", Some(self.interp_threads_head)),
            ("tstate_next", Some(self.tstate_next)),
            ("tstate_interp", Some(self.tstate_interp)),
            ("tstate_thread_id", Some(self.tstate_thread_id)),
            ("tstate_native_thread_id", self.tstate_native_thread_id),
            ("tstate_frame", Some(self.tstate_frame)),
            ("cframe_current_frame", cframe_current_frame),
            ("frame_back", Some(self.frame_back)),
            ("frame_code", Some(self.frame_code)),
            ("frame_lasti", Some(self.frame_lasti)),
            ("frame_owner", self.frame_owner),
            ("frame_is_entry", self.frame_is_entry),
            ("frame_size", Some(self.frame_size)),
            ("frame_owned_by_cstack", self.owned_by_cstack.map(u64::from)),
            (
                "frame_owned_by_generator",
                self.owned_by_generator.map(u64::from),
            ),
            ("code_filename", Some(self.code_filename)),
            ("code_name", Some(self.code_name)),
            ("code_qualname", self.code_qualname),
            ("code_firstlineno", Some(self.code_firstlineno)),
            ("code_linetable", Some(self.code_linetable)),
            ("code_code", Some(self.code_code)),
            ("code_firsttraceable", self.code_firsttraceable),
            ("code_size", Some(self.code_size)),
            ("bytes_size", Some(self.bytes_size)),
            ("bytes_sval", Some(self.bytes_sval)),
            ("unicode_length", Some(self.unicode_length)),
            ("unicode_state", Some(self.unicode_state)),
            ("ascii_size", Some(self.ascii_size)),
            ("compact_size", Some(self.compact_size)),
            ("state_kind_shift", Some(u64::from(self.state_kind_shift))),
            ("state_kind_bits", Some(STATE_KIND_BITS)),
            (
                "state_compact_shift",
                Some(u64::from(self.state_compact_shift)),
            ),
            ("state_ascii_shift", Some(u64::from(self.state_ascii_shift))),
            ("object_type", Some(self.object_type)),
        ]
    }
}

/// CPython 3.9 (from the probe against 3.9.18's headers).
pub const PY39: Layout = Layout {
    minor: 9,
    frames: FrameModel::Object {
        lasti_in_units: false,
    },
    runtime_interpreters_head: 32,
    interp_next: 0,
    interp_threads_head: 8,
    tstate_next: 8,
    tstate_interp: 16,
    tstate_thread_id: 176,
    tstate_native_thread_id: None,
    tstate_frame: 24,
    frame_back: 24,
    frame_code: 32,
    frame_lasti: 104,
    frame_owner: None,
    frame_is_entry: None,
    frame_size: 368,
    owned_by_cstack: None,
    owned_by_generator: None,
    code_filename: 104,
    code_name: 112,
    code_qualname: None,
    code_firstlineno: 40,
    code_linetable: 120,
    code_code: 48,
    code_inline: false,
    code_firsttraceable: None,
    code_size: 176,
    bytes_size: 16,
    bytes_sval: 32,
    unicode_length: 16,
    unicode_state: 32,
    ascii_size: 48,
    compact_size: 72,
    state_kind_shift: 2,
    state_compact_shift: 5,
    state_ascii_shift: 6,
    object_type: 8,
};

/// CPython 3.10 (from the probe against 3.10.13's headers).
pub const PY310: Layout = Layout {
    minor: 10,
    frames: FrameModel::Object {
        lasti_in_units: true,
    },
    runtime_interpreters_head: 32,
    interp_next: 0,
    interp_threads_head: 8,
    tstate_next: 8,
    tstate_interp: 16,
    tstate_thread_id: 176,
    tstate_native_thread_id: None,
    tstate_frame: 24,
    frame_back: 24,
    frame_code: 32,
    frame_lasti: 96,
    frame_owner: None,
    frame_is_entry: None,
    frame_size: 360,
    owned_by_cstack: None,
    owned_by_generator: None,
    code_filename: 104,
    code_name: 112,
    code_qualname: None,
    code_firstlineno: 40,
    code_linetable: 120,
    code_code: 48,
    code_inline: false,
    code_firsttraceable: None,
    code_size: 176,
    bytes_size: 16,
    bytes_sval: 32,
    unicode_length: 16,
    unicode_state: 32,
    ascii_size: 48,
    compact_size: 72,
    state_kind_shift: 2,
    state_compact_shift: 5,
    state_ascii_shift: 6,
    object_type: 8,
};

/// CPython 3.11 (from the probe against 3.11.7's headers; Debian's 3.11.2 agrees).
pub const PY311: Layout = Layout {
    minor: 11,
    frames: FrameModel::Interpreter {
        cframe_current_frame: 8,
    },
    runtime_interpreters_head: 40,
    interp_next: 0,
    interp_threads_head: 16,
    tstate_next: 8,
    tstate_interp: 16,
    tstate_thread_id: 152,
    tstate_native_thread_id: Some(160),
    tstate_frame: 56,
    frame_back: 48,
    frame_code: 32,
    frame_lasti: 56,
    frame_owner: Some(69),
    frame_is_entry: Some(68),
    frame_size: 80,
    owned_by_cstack: None,
    owned_by_generator: Some(1),
    code_filename: 112,
    code_name: 120,
    code_qualname: Some(128),
    code_firstlineno: 72,
    code_linetable: 136,
    code_code: 184,
    code_inline: true,
    code_firsttraceable: Some(168),
    code_size: 192,
    bytes_size: 16,
    bytes_sval: 32,
    unicode_length: 16,
    unicode_state: 32,
    ascii_size: 48,
    compact_size: 72,
    state_kind_shift: 2,
    state_compact_shift: 5,
    state_ascii_shift: 6,
    object_type: 8,
};

/// CPython 3.12 (from the probe against 3.12.1's headers).
pub const PY312: Layout = Layout {
    minor: 12,
    frames: FrameModel::Interpreter {
        cframe_current_frame: 0,
    },
    runtime_interpreters_head: 40,
    interp_next: 0,
    interp_threads_head: 72,
    tstate_next: 8,
    tstate_interp: 16,
    tstate_thread_id: 136,
    tstate_native_thread_id: Some(144),
    tstate_frame: 56,
    frame_back: 8,
    frame_code: 0,
    frame_lasti: 56,
    frame_owner: Some(70),
    frame_is_entry: None,
    frame_size: 80,
    owned_by_cstack: Some(3),
    owned_by_generator: Some(1),
    code_filename: 112,
    code_name: 120,
    code_qualname: Some(128),
    code_firstlineno: 68,
    code_linetable: 136,
    code_code: 192,
    code_inline: true,
    code_firsttraceable: Some(176),
    code_size: 200,
    bytes_size: 16,
    bytes_sval: 32,
    unicode_length: 16,
    unicode_state: 32,
    ascii_size: 40,
    compact_size: 56,
    state_kind_shift: 2,
    state_compact_shift: 5,
    state_ascii_shift: 6,
    object_type: 8,
};

/// CPython 3.13 (from the probe against 3.13.0's headers; the interpreter's own
/// `_Py_DebugOffsets` agree).
pub const PY313: Layout = Layout {
    minor: 13,
    frames: FrameModel::Interpreter313,
    runtime_interpreters_head: 632,
    interp_next: 7264,
    interp_threads_head: 7344,
    tstate_next: 8,
    tstate_interp: 16,
    tstate_thread_id: 152,
    tstate_native_thread_id: Some(160),
    tstate_frame: 72,
    frame_back: 8,
    frame_code: 0,
    frame_lasti: 56,
    frame_owner: Some(70),
    frame_is_entry: None,
    frame_size: 80,
    owned_by_cstack: Some(3),
    owned_by_generator: Some(1),
    code_filename: 112,
    code_name: 120,
    code_qualname: Some(128),
    code_firstlineno: 68,
    code_linetable: 136,
    code_code: 200,
    code_inline: true,
    code_firsttraceable: Some(184),
    code_size: 208,
    bytes_size: 16,
    bytes_sval: 32,
    unicode_length: 16,
    unicode_state: 32,
    ascii_size: 40,
    compact_size: 56,
    state_kind_shift: 2,
    state_compact_shift: 5,
    state_ascii_shift: 6,
    object_type: 8,
};

/// Every known layout, oldest first.
pub const LAYOUTS: &[Layout] = &[PY39, PY310, PY311, PY312, PY313];

/// The layout of minor version `minor` of CPython 3, if known.
pub fn for_minor(minor: u8) -> Option<&'static Layout> {
    LAYOUTS.iter().find(|layout| layout.minor == minor)
}
