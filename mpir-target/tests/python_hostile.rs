//! The CPython reader on interpreter memory built by hand (a 3.11 layout in a mock target):
//! a well-formed interpreter decodes, and every kind of damage — loops, huge sizes, wrong
//! types, unmapped pointers, versions without a layout, a layout that almost fits — is a typed
//! problem naming what and where, never a panic, a hang or a huge allocation.

use mpir_target::mock::MockTargetBuilder;
use mpir_target::python::layout::{FrameModel, Layout, PY311};
use mpir_target::python::{Interpreter, MAX_FRAMES};
use mpir_target::{MockTarget, Symbol, SymbolKind};
use mpir_types::DataModel;
use mpir_types::stacks::{PythonProblem, PythonStack};

const TID: u32 = 4242;
const L: Layout = PY311;

/// A fake interpreter under construction: objects are allocated zeroed, then filled.
struct Fake {
    b: MockTargetBuilder,
    code_type: u64,
    unicode_type: u64,
    bytes_type: u64,
}

impl Fake {
    fn new(version: u64) -> Fake {
        let mut b = MockTargetBuilder::new(DataModel::LP64);
        let typ = |b: &mut MockTargetBuilder, name: &str| {
            let a = b.alloc(64);
            b.symbol(Symbol::new(name, a, 64, SymbolKind::Object));
            a
        };
        let code_type = typ(&mut b, "PyCode_Type");
        let unicode_type = typ(&mut b, "PyUnicode_Type");
        let bytes_type = typ(&mut b, "PyBytes_Type");
        let v = b.alloc(8);
        b.symbol(Symbol::new("Py_Version", v, 8, SymbolKind::Object));
        let mut f = Fake {
            b,
            code_type,
            unicode_type,
            bytes_type,
        };
        f.put(v, 0, version);
        f
    }

    fn put(&mut self, address: u64, offset: u64, value: u64) {
        self.b
            .write_with(address + offset, 8, |v| v.put_uint(0, 8, value, "word"));
    }

    fn put_bytes(&mut self, address: u64, offset: u64, bytes: &[u8]) {
        let len = bytes.len() as u64;
        self.b
            .write_with(address + offset, len, |v| v.put_bytes(0, bytes, "bytes"));
    }

    /// A compact ASCII `str`.
    fn string(&mut self, text: &str) -> u64 {
        let a = self.b.alloc(L.ascii_size + text.len() as u64 + 1);
        let t = self.unicode_type;
        self.put(a, L.object_type, t);
        self.put(a, L.unicode_length, text.len() as u64);
        let state = (1u64 << L.state_kind_shift)
            | (1 << L.state_compact_shift)
            | (1 << L.state_ascii_shift);
        self.put_bytes(a, L.unicode_state, &(state as u32).to_le_bytes());
        self.put_bytes(a, L.ascii_size, text.as_bytes());
        a
    }

    fn bytes(&mut self, data: &[u8]) -> u64 {
        let a = self.b.alloc(L.bytes_sval + data.len() as u64 + 1);
        let t = self.bytes_type;
        self.put(a, L.object_type, t);
        self.put(a, L.bytes_size, data.len() as u64);
        if !data.is_empty() {
            self.put_bytes(a, L.bytes_sval, data);
        }
        a
    }

    /// A code object of `name` in `file` starting at `first`, whose line table puts all its
    /// units on `first + delta` (one long "no columns" entry per 8 units).
    fn code(&mut self, name: &str, file: &str, first: u32, delta: u8) -> u64 {
        let a = self.b.alloc(L.code_size + 64);
        let t = self.code_type;
        self.put(a, L.object_type, t);
        let n = self.string(name);
        let f = self.string(file);
        // Form 13 (no columns), 8 units, signed varint delta (even: positive).
        let table = [0x80 | (13 << 3) | 7, delta << 1, 0x80 | (13 << 3) | 7, 0];
        let lt = self.bytes(&table);
        self.put(a, L.code_qualname.unwrap(), n);
        self.put(a, L.code_name, n);
        self.put(a, L.code_filename, f);
        self.put(a, L.code_linetable, lt);
        self.put_bytes(a, L.code_firstlineno, &(first as i32).to_le_bytes());
        a
    }

    /// An interpreter frame running `code` at unit 2, `previous` its caller.
    fn frame(&mut self, code: u64, previous: u64, entry: bool) -> u64 {
        let a = self.b.alloc(L.frame_size);
        self.put(a, L.frame_code, code);
        self.put(a, L.frame_back, previous);
        self.put(a, L.frame_lasti, code + L.code_code + 4);
        if entry {
            self.put_bytes(a, L.frame_is_entry.unwrap(), &[1]);
        }
        a
    }

    /// The runtime, one interpreter, one thread state naming `tid`, its C frame pointing at
    /// `innermost`; returns (runtime, interp, tstate).
    fn runtime(&mut self, tid: u64, innermost: u64) -> (u64, u64, u64) {
        let rt = self.b.alloc(L.runtime_interpreters_head + 8);
        self.b
            .symbol(Symbol::new("_PyRuntime", rt, 1024, SymbolKind::Object));
        let interp = self.b.alloc(L.interp_threads_head + 8);
        let tstate = self.b.alloc(L.tstate_native_thread_id.unwrap() + 8);
        let FrameModel::Interpreter {
            cframe_current_frame,
        } = L.frames
        else {
            unreachable!("3.11 has C frames")
        };
        let cframe = self.b.alloc(cframe_current_frame + 8);
        self.put(rt, L.runtime_interpreters_head, interp);
        self.put(interp, L.interp_threads_head, tstate);
        self.put(tstate, L.tstate_interp, interp);
        self.put(tstate, L.tstate_native_thread_id.unwrap(), tid);
        self.put(tstate, L.tstate_frame, cframe);
        self.put(cframe, cframe_current_frame, innermost);
        (rt, interp, tstate)
    }

    fn build(self) -> MockTarget {
        self.b.build()
    }
}

const V311: u64 = 0x030b_07f0;

/// A well-formed two-frame thread: `inner` (line 11) called from `outer` (line 22), the
/// outer one the entry of its native evaluation call.
fn two_frames() -> (Fake, u64, u64) {
    let mut f = Fake::new(V311);
    let outer_code = f.code("outer", "app.py", 20, 2);
    let inner_code = f.code("Ring.inner", "app.py", 10, 1);
    let outer = f.frame(outer_code, 0, true);
    let inner = f.frame(inner_code, outer, false);
    (f, inner, outer)
}

fn read(t: &MockTarget) -> Result<Vec<PythonStack>, PythonProblem> {
    let py = Interpreter::find(t)
        .expect("found")
        .expect("an interpreter");
    py.stacks(t, &[(TID, None)])
}

#[test]
fn a_well_formed_interpreter_decodes() {
    let (mut f, inner, _) = two_frames();
    f.runtime(u64::from(TID), inner);
    let t = f.build();
    let py = Interpreter::find(&t).unwrap().unwrap();
    assert_eq!(py.version(), "3.11");
    let stacks = py.stacks(&t, &[(TID, None)]).unwrap();
    assert_eq!(stacks.len(), 1);
    let s = &stacks[0];
    assert_eq!(s.tid, TID);
    assert_eq!(s.problem, None);
    let got: Vec<(&str, u32, bool)> = s
        .frames
        .iter()
        .map(|p| (&*p.function, p.line, p.ends_call))
        .collect();
    assert_eq!(got, [("Ring.inner", 11, false), ("outer", 22, true)]);
    assert_eq!(&*s.frames[0].file, "app.py");
}

#[test]
fn no_runtime_is_no_python() {
    let t = MockTargetBuilder::new(DataModel::LP64).build();
    assert!(Interpreter::find(&t).unwrap().is_none());
}

#[test]
fn versions_without_a_layout_are_refused_by_name() {
    for (hex, found) in [(0x030e_00f0u64, "3.14"), (0x0207_12f0, "2.7")] {
        let mut f = Fake::new(hex);
        f.runtime(u64::from(TID), 0);
        let t = f.build();
        match Interpreter::find(&t) {
            Err(PythonProblem::UnknownVersion { found: got }) => {
                assert!(got.starts_with(found), "{got}")
            }
            other => panic!("{hex:#x}: {other:?}"),
        }
    }
    // No Py_Version and none of the newer API: older than 3.9.
    let mut b = MockTargetBuilder::new(DataModel::LP64);
    let rt = b.alloc(64);
    b.symbol(Symbol::new("_PyRuntime", rt, 64, SymbolKind::Object));
    let t = b.build();
    assert!(matches!(
        Interpreter::find(&t),
        Err(PythonProblem::UnknownVersion { found }) if found.contains("older than 3.9")
    ));
}

#[test]
fn a_32_bit_process_is_refused() {
    let mut b = MockTargetBuilder::new(DataModel::ILP32);
    let rt = b.alloc(64);
    b.symbol(Symbol::new("_PyRuntime", rt, 64, SymbolKind::Object));
    let v = b.alloc(8);
    b.write_with(v, 4, |w| w.put_uint(0, 4, V311, "v"));
    b.symbol(Symbol::new("Py_Version", v, 4, SymbolKind::Object));
    let t = b.build();
    assert!(matches!(
        Interpreter::find(&t),
        Err(PythonProblem::Unproven { why, .. }) if why.contains("64-bit")
    ));
}

#[test]
fn a_layout_that_almost_fits_is_unproven() {
    // The thread state names another interpreter: the one check that fails.
    let (mut f, inner, _) = two_frames();
    let (_, _, tstate) = f.runtime(u64::from(TID), inner);
    f.put(tstate, L.tstate_interp, 0xdead_0000);
    let t = f.build();
    match read(&t) {
        Err(PythonProblem::Unproven { version, why }) => {
            assert_eq!(version, "3.11");
            assert!(why.contains("0xdead0000"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    // No thread state names a thread of the process.
    let (mut f, inner, _) = two_frames();
    f.runtime(7, inner);
    let t = f.build();
    assert!(
        matches!(read(&t), Err(PythonProblem::Unproven { why, .. }) if why.contains("names a thread"))
    );
}

#[test]
fn a_looping_frame_chain_keeps_the_frames_before() {
    let (mut f, inner, outer) = two_frames();
    f.put(outer, L.frame_back, inner);
    f.runtime(u64::from(TID), inner);
    let t = f.build();
    let s = &read(&t).unwrap()[0];
    assert_eq!(s.frames.len(), 2);
    assert_eq!(s.problem, Some(PythonProblem::Cycle { address: inner }));
}

#[test]
fn an_endless_frame_chain_stops_at_the_limit() {
    let mut f = Fake::new(V311);
    let code = f.code("f", "deep.py", 1, 0);
    let mut previous = 0;
    for _ in 0..=MAX_FRAMES {
        previous = f.frame(code, previous, true);
    }
    f.runtime(u64::from(TID), previous);
    let t = f.build();
    let s = &read(&t).unwrap()[0];
    assert_eq!(s.frames.len(), MAX_FRAMES);
    assert_eq!(
        s.problem,
        Some(PythonProblem::TooDeep { limit: MAX_FRAMES })
    );
}

#[test]
fn a_looping_thread_list_is_corrupt() {
    let (mut f, inner, _) = two_frames();
    let (_, _, tstate) = f.runtime(u64::from(TID), inner);
    f.put(tstate, L.tstate_next, tstate);
    let t = f.build();
    assert!(
        matches!(read(&t), Err(PythonProblem::Corrupt { what, .. }) if what.contains("thread state list"))
    );
}

#[test]
fn damaged_objects_are_named_with_their_address() {
    // A code object whose type is not PyCode_Type.
    let (mut f, inner, _) = two_frames();
    f.runtime(u64::from(TID), inner);
    let t = f.build();
    let code = {
        let s = read(&t).unwrap();
        assert!(s[0].problem.is_none());
        // Re-read the inner frame's code address from the target.
        u64::from_le_bytes(t.peek(inner + L.frame_code, 8).unwrap().try_into().unwrap())
    };
    let (mut f, inner, _) = two_frames();
    f.runtime(u64::from(TID), inner);
    f.put(code, L.object_type, 0x1234);
    let t = f.build();
    match &read(&t).unwrap()[0].problem {
        Some(PythonProblem::Corrupt { what, address, why }) => {
            assert_eq!(what, "a code object");
            assert_eq!(*address, code);
            assert!(why.contains("PyCode_Type"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_huge_line_table_is_refused_before_it_is_read() {
    let mut f = Fake::new(V311);
    let code = f.code("f", "big.py", 1, 0);
    let table = f.bytes(&[]);
    f.put(table, L.bytes_size, 1 << 40);
    f.put(code, L.code_linetable, table);
    let frame = f.frame(code, 0, true);
    f.runtime(u64::from(TID), frame);
    let t = f.build();
    match &read(&t).unwrap()[0].problem {
        Some(PythonProblem::Corrupt { address, why, .. }) => {
            assert_eq!(*address, table);
            assert!(why.contains("1099511627776 bytes"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn strange_strings_are_refused_or_cut() {
    // A kind that does not exist.
    let mut f = Fake::new(V311);
    let code = f.code("f", "s.py", 1, 0);
    let name = f.string("f");
    let state = (5u32 << L.state_kind_shift) | (1 << L.state_compact_shift);
    f.put_bytes(name, L.unicode_state, &state.to_le_bytes());
    f.put(code, L.code_qualname.unwrap(), name);
    let frame = f.frame(code, 0, true);
    f.runtime(u64::from(TID), frame);
    let t = f.build();
    assert!(matches!(
        &read(&t).unwrap()[0].problem,
        Some(PythonProblem::Corrupt { why, .. }) if why.contains("kind 5")
    ));
    // A length far beyond what is mapped: cut at MAX_NAME, never allocated whole.
    let mut f = Fake::new(V311);
    let long = "x".repeat(2000);
    let code = f.code(&long, "s.py", 1, 0);
    let frame = f.frame(code, 0, true);
    f.runtime(u64::from(TID), frame);
    let t = f.build();
    let s = &read(&t).unwrap()[0];
    assert!(s.problem.is_none(), "{:?}", s.problem);
    assert_eq!(s.frames[0].function.chars().count(), 1025);
    assert!(s.frames[0].function.ends_with('…'));
}

#[test]
fn an_unmapped_frame_is_unreadable_with_the_frames_before() {
    let (mut f, inner, outer) = two_frames();
    f.put(outer, L.frame_back, 0x7fff_0000_0000);
    f.runtime(u64::from(TID), inner);
    let t = f.build();
    let s = &read(&t).unwrap()[0];
    assert_eq!(s.frames.len(), 2);
    assert_eq!(
        s.problem,
        Some(PythonProblem::Unreadable {
            what: "a frame".into(),
            address: 0x7fff_0000_0000
        })
    );
}

#[test]
fn garbage_everywhere_never_panics() {
    // Every word of the runtime, interpreter, thread state and frame of a well-formed
    // interpreter replaced in turn by garbage: the reader answers (an error or frames), and
    // never loops or panics.
    let sizes = [
        L.runtime_interpreters_head + 8,
        L.interp_threads_head + 8,
        L.tstate_native_thread_id.unwrap() + 8,
        L.frame_size,
    ];
    let mut answers = 0;
    for (which, size) in sizes.into_iter().enumerate() {
        for off in (0..size - 7).step_by(8) {
            for garbage in [0u64, 1, u64::MAX, 0x7fff_ffff_ffff, 0x10] {
                let (mut f, inner, _) = two_frames();
                let (rt, interp, tstate) = f.runtime(u64::from(TID), inner);
                let object = [rt, interp, tstate, inner][which];
                f.put(object, off, garbage);
                let t = f.build();
                let _ = read(&t);
                answers += 1;
            }
        }
    }
    assert!(answers > 100);
}
