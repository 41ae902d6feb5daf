//! The unwinder on garbage: registers pointing nowhere, stacks of random words, frame-pointer
//! cycles. A partial stack with the reason on it, never a panic, a hang or more frames than
//! asked for.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use mpir_target::MockTarget;
use mpir_target::debuginfo::{DebugOptions, ProcessImages};
use mpir_target::mock::Access;
use mpir_target::unwind::{
    Arch, EndReason, Registers, Stack, SymbolCache, Trust, UnwindOptions, Unwinder,
};
use mpir_types::DataModel;
use proptest::prelude::*;

/// The images of this test process: real code with real CFI, under a mock stack.
fn own_images() -> &'static ProcessImages {
    static IMAGES: std::sync::LazyLock<ProcessImages> = std::sync::LazyLock::new(|| {
        ProcessImages::for_pid(std::process::id(), DebugOptions::default()).unwrap()
    });
    &IMAGES
}

/// One symbol cache for every walk of this file (the test binary's DWARF is loaded once).
fn shared_cache() -> &'static SymbolCache {
    static CACHE: std::sync::LazyLock<SymbolCache> = std::sync::LazyLock::new(SymbolCache::new);
    &CACHE
}

#[inline(never)]
fn some_code() -> u64 {
    std::hint::black_box(42)
}

fn code_address() -> u64 {
    some_code as *const () as u64 + 1
}

const STACK: u64 = 0x7000_0000;

fn mock_with_stack(words: &[u64]) -> MockTarget {
    let mut b = MockTarget::builder(DataModel::LP64);
    let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    b.map(STACK, bytes, Access::READ_WRITE);
    b.build()
}

/// What every walk must satisfy.
fn sane(stack: &Stack, options: &UnwindOptions) {
    assert!(stack.frames.len() <= options.max_frames, "{stack:?}");
    for pair in stack.frames.windows(2) {
        assert!(pair[1].sp > pair[0].sp, "sp must increase: {stack:?}");
    }
    if let Some(first) = stack.frames.first() {
        assert_eq!(first.trust, Trust::Context);
    }
}

#[test]
fn pc_zero_and_sp_into_unmapped_memory_is_a_partial_stack_with_a_reason() {
    let images = own_images();
    let unwinder = Unwinder::new(images);
    let target = mock_with_stack(&[]);
    let stack = unwinder.unwind(&target, &Registers::new(Arch::X86_64, 0, 0xdead_0000, 0));
    assert_eq!(stack.frames.len(), 1, "{stack:?}");
    assert_eq!(stack.frames[0].pc, 0);
    assert_eq!(stack.frames[0].module, None);
    match &stack.end {
        EndReason::Unreadable { reason } => assert!(reason.contains("0xdead0000"), "{reason}"),
        other => panic!("expected an unreadable stack, got {other}"),
    }
}

#[test]
fn code_with_an_unmapped_stack_names_the_frame_and_stops() {
    let images = own_images();
    let unwinder = Unwinder::new(images);
    let target = mock_with_stack(&[]);
    let pc = code_address();
    let stack = unwinder.unwind(&target, &Registers::new(Arch::X86_64, pc, 0xdead_0000, 0));
    assert_eq!(stack.frames.len(), 1, "{stack:?}");
    let f = &stack.frames[0];
    assert!(
        f.function
            .as_deref()
            .is_some_and(|n| n.contains("some_code")),
        "{f:?}"
    );
    assert!(f.module.is_some());
    assert!(
        matches!(stack.end, EndReason::Unreadable { .. }),
        "{}",
        stack.end
    );
}

#[test]
fn no_registers_no_frames() {
    let images = own_images();
    let stack =
        Unwinder::new(images).unwind(&mock_with_stack(&[]), &Registers::empty(Arch::X86_64));
    assert!(stack.frames.is_empty());
    assert_eq!(stack.end, EndReason::MissingRegisters);
}

#[test]
fn a_frame_pointer_cycle_ends_the_walk() {
    // A pc in no image (no CFI), fp pointing at itself with a return address into code: the
    // chain gives one frame, then the fp no longer lies above the sp; the scan finds the same
    // return address again only further up, so the walk is bounded by the stack's end.
    let images = own_images();
    let ra = code_address();
    let fp = STACK;
    let words = [fp, ra, fp, ra];
    let target = mock_with_stack(&words);
    let options = UnwindOptions::default().with_max_frames(50);
    let unwinder = Unwinder::with_options(images, options);
    let stack = unwinder.unwind(&target, &Registers::new(Arch::X86_64, 0x10, STACK, fp));
    sane(&stack, &options);
    assert!(stack.frames.len() >= 2, "{stack:?}");
    assert_eq!(stack.frames[1].trust, Trust::FramePointer);
    assert_eq!(stack.frames[1].pc, ra);
    assert!(!matches!(stack.end, EndReason::MaxFrames), "{}", stack.end);
}

#[test]
fn a_stack_of_return_addresses_stops_at_the_frame_limit() {
    let images = own_images();
    let ra = code_address();
    let target = mock_with_stack(&vec![ra; 4096]);
    let options = UnwindOptions::default().with_max_frames(20);
    let stack = Unwinder::with_options(images, options)
        .unwind(&target, &Registers::new(Arch::X86_64, 0x10, STACK, 0));
    sane(&stack, &options);
    assert_eq!(stack.frames.len(), 20);
    assert_eq!(stack.end, EndReason::MaxFrames);
    assert_eq!(stack.frames[1].trust, Trust::Scan);
}

#[test]
fn scanning_can_be_disabled() {
    let images = own_images();
    let target = mock_with_stack(&[code_address(); 8]);
    let options = UnwindOptions::default().with_max_scan_words(0);
    let stack = Unwinder::with_options(images, options)
        .unwind(&target, &Registers::new(Arch::X86_64, 0x10, STACK, 0));
    assert_eq!(stack.frames.len(), 1);
    assert!(
        matches!(stack.end, EndReason::NoCaller { .. }),
        "{}",
        stack.end
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn garbage_registers_and_stacks_never_panic(
        pc_choice in 0u8..3,
        pc_raw in any::<u64>(),
        sp_off in 0u64..0x400,
        fp_raw in any::<u64>(),
        words in proptest::collection::vec(
            prop_oneof![any::<u64>(), Just(0u64), (0u64..0x400).prop_map(|o| STACK + o * 8)],
            0..128,
        ),
        sprinkle in proptest::collection::vec(0usize..128, 0..8),
    ) {
        let images = own_images();
        let ra = code_address();
        let mut words = words;
        for i in sprinkle {
            if let Some(w) = words.get_mut(i) {
                *w = ra;
            }
        }
        let pc = match pc_choice { 0 => pc_raw, 1 => ra, _ => 0 };
        let target = mock_with_stack(&words);
        let options = UnwindOptions::default().with_max_frames(64);
        let unwinder = Unwinder::with_cache(images, options, shared_cache());
        for arch in [Arch::X86_64, Arch::I386] {
            let stack = unwinder.unwind(&target, &Registers::new(arch, pc, STACK + sp_off, fp_raw));
            sane(&stack, &options);
            // Symbolised: every physical frame gives at least one frame, at most 64 (inline
            // ones), the last of each not inline; complete only when the walk was.
            let symbolised = unwinder.thread_stack(7, &stack);
            assert!(symbolised.frames.len() >= stack.frames.len());
            assert!(symbolised.frames.len() <= 64 * stack.frames.len());
            assert_eq!(
                symbolised.frames.iter().filter(|f| !f.inline).count(),
                stack.frames.len()
            );
            assert_eq!(symbolised.truncated.is_none(), stack.end == EndReason::Outermost);
        }
    }
}

#[test]
fn a_garbage_or_missing_vdso_is_refused_with_a_reason() {
    let mut unwinder = Unwinder::new(own_images());
    let garbage = mock_with_stack(&[0x464c_457f, 1, 2, 3]);
    assert!(unwinder.add_vdso(&garbage, STACK).is_err());
    assert!(unwinder.add_vdso(&garbage, 0xdead_0000).is_err());
    // The walk still works without it.
    let stack = unwinder.unwind(&garbage, &Registers::new(Arch::X86_64, 0, 0xdead_0000, 0));
    assert_eq!(stack.frames.len(), 1);
}

#[test]
fn this_binarys_own_code_has_its_name_and_source_line() {
    let unwinder = Unwinder::with_cache(own_images(), UnwindOptions::default(), shared_cache());
    let target = mock_with_stack(&[]);
    let stack = unwinder.unwind(
        &target,
        &Registers::new(Arch::X86_64, code_address(), STACK, 0),
    );
    let symbolised = unwinder.thread_stack(1, &stack);
    let frame = symbolised.frames.last().expect("a frame");
    assert!(
        frame
            .symbol
            .as_deref()
            .is_some_and(|s| s.contains("some_code")),
        "{frame:?}"
    );
    let location = frame
        .location
        .as_ref()
        .expect("this test binary has line tables");
    assert!(location.file.ends_with("unwind_hostile.rs"), "{location:?}");
    // `some_code` is a few lines long, just below `shared_cache`.
    let source = include_str!("unwind_hostile.rs");
    let line = source
        .lines()
        .position(|l| l.starts_with("fn some_code()"))
        .unwrap() as u32
        + 1;
    assert!(
        (line..line + 3).contains(&location.line),
        "{location:?} vs {line}"
    );
    // The module is this binary, the offset a link-time address inside it.
    assert!(frame.module.contains("unwind_hostile"), "{frame:?}");
    assert!(shared_cache().stats().dwarf_loaded >= 1);
}
