//! The bounds every hostile case is held to: it ends within a time bound (a watchdog), it
//! allocates no more than a memory bound (a counting global allocator, per thread), and it
//! does not panic (the case runs on its own thread; a panic there fails the test with the
//! panic's message, the test process survives).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::mpsc;
use std::time::Duration;

/// Counts the bytes allocated by each thread (live and peak) and passes everything on to the
/// system allocator.
struct Counting;

thread_local! {
    /// Bytes this thread allocated and did not free yet (frees from other threads are not
    /// seen: a lower bound is not what we need, the peak is).
    static LIVE_BYTES: Cell<i64> = const { Cell::new(0) };
    /// The highest `LIVE_BYTES` since [`reset_peak`].
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn count(delta: i64) {
    // `try_with`: during thread teardown the counters may be gone; nothing to count then.
    let _ = LIVE_BYTES.try_with(|live| {
        let now = live.get() + delta;
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every method forwards to `System` with the caller's own arguments, so `System`'s
// guarantees are ours; the counting only touches const-initialised thread-locals of `Cell<i64>`
// (no allocation, no destructor), so it cannot re-enter the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is; `ptr` came from this allocator, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is; `ptr` came from `System` with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn reset_peak() {
    let live = LIVE_BYTES.with(Cell::get);
    PEAK.with(|p| p.set(live));
}

/// Bytes allocated beyond what was live at the last [`reset_peak`], at the worst moment.
fn peak_since_reset(base: i64) -> u64 {
    (PEAK.with(Cell::get) - base).max(0) as u64
}

/// What a case may take.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bounds {
    /// Wall time.
    pub(crate) time: Duration,
    /// Bytes allocated at once by the case's thread (beyond its setup).
    pub(crate) bytes: u64,
}

/// Decoding and reading cases: 5 s, 4 MiB.
pub(crate) const SMALL: Bounds = Bounds {
    time: Duration::from_secs(5),
    bytes: 4 << 20,
};

/// Cases over live processes or whole files: 20 s, 16 MiB.
pub(crate) const LIVE: Bounds = Bounds {
    time: Duration::from_secs(20),
    bytes: 16 << 20,
};

/// What a case measured.
#[derive(Debug)]
pub(crate) struct Measured<R> {
    /// What the case returned (the typed error, usually).
    pub(crate) result: R,
    /// Its peak allocation.
    pub(crate) bytes: u64,
}

/// Runs `setup` (unmeasured) and then `case` on a fresh thread, and holds the case to
/// `bounds`: it must return within `bounds.time` (else the test fails, naming `name`; the
/// thread is left behind, the process survives), allocate at most `bounds.bytes`, and not
/// panic. Returns what the case returned.
pub(crate) fn run<S, R>(
    name: &str,
    bounds: Bounds,
    setup: impl FnOnce() -> S + Send + 'static,
    case: impl FnOnce(S) -> R + Send + 'static,
) -> R
where
    R: Send + std::fmt::Debug + 'static,
{
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(format!("hostile {name}"))
        .spawn(move || {
            let input = setup();
            reset_peak();
            let base = LIVE_BYTES.with(Cell::get);
            let result = case(input);
            let bytes = peak_since_reset(base);
            let _ = tx.send(Measured { result, bytes });
        })
        .unwrap();
    match rx.recv_timeout(bounds.time) {
        Ok(m) => {
            let _ = worker.join();
            if m.bytes > bounds.bytes {
                let result: String = format!("{:?}", m.result).chars().take(400).collect();
                panic!(
                    "{name}: allocated {} bytes at its peak, above the bound of {} (result: \
                     {result}…)",
                    m.bytes, bounds.bytes
                );
            }
            m.result
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!(
                "{name}: no result within {:?} (a hang on target data)",
                bounds.time
            )
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                panic!("{name}: panicked on target data: {msg}")
            }
            Ok(()) => panic!("{name}: the case thread ended without a result"),
        },
    }
}

/// [`run`] for a case whose setup is done already on the calling thread (the input must be
/// `Send`).
pub(crate) fn run_with<S, R>(
    name: &str,
    bounds: Bounds,
    input: S,
    case: impl FnOnce(S) -> R + Send + 'static,
) -> R
where
    S: Send + 'static,
    R: Send + std::fmt::Debug + 'static,
{
    run(name, bounds, move || input, case)
}

#[test]
fn the_harness_catches_a_hang_a_panic_and_an_allocation() {
    let hang = std::panic::catch_unwind(|| {
        run(
            "hang",
            Bounds {
                time: Duration::from_millis(100),
                bytes: 1 << 20,
            },
            || (),
            |()| {
                std::thread::sleep(Duration::from_secs(2));
            },
        )
    });
    let msg = hang.unwrap_err();
    assert!(
        msg.downcast_ref::<String>()
            .unwrap()
            .contains("no result within")
    );
    let panicked =
        std::panic::catch_unwind(|| run("panic", SMALL, || (), |()| -> () { panic!("boom") }));
    let msg = panicked.unwrap_err();
    assert!(
        msg.downcast_ref::<String>()
            .unwrap()
            .contains("panicked on target data: boom")
    );
    let big =
        std::panic::catch_unwind(|| run("alloc", SMALL, || (), |()| vec![1u8; 8 << 20].len()));
    let msg = big.unwrap_err();
    assert!(
        msg.downcast_ref::<String>()
            .unwrap()
            .contains("above the bound")
    );
    // Setup is not counted; what the case frees early still counts at its peak.
    let n = run(
        "ok",
        SMALL,
        || vec![0u8; 8 << 20],
        |v| {
            let tmp = vec![2u8; 1 << 20];
            drop(tmp);
            v.len()
        },
    );
    assert_eq!(n, 8 << 20);
}
