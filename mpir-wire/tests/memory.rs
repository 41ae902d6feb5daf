//! "Never an allocation of what the peer claims": headers announcing large payloads that never
//! come cost the receiver only the bytes that did come. A counting global allocator (per
//! thread) measures it, which is why this is a test binary of its own.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use mpir_wire::{
    AgentId, Connection, ContentKind, Decoder, Gate, HEADER_LEN, Hello, Limits, MAX_FRAME, Message,
    MessageKind, Options, Token, WireError,
};

/// Passes everything to `System`, counting this thread's live bytes and their peak.
struct Counting;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn count(delta: i64) {
    // During thread teardown the counters may be gone: nothing to count then.
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + delta);
        let _ = PEAK.try_with(|p| p.set(p.get().max(live.get())));
    });
}

// SAFETY: each method forwards its own arguments to `System`, whose guarantees are therefore
// ours; the counting touches only const-initialised thread-local `Cell<i64>`s (no allocation,
// no destructor), so it cannot re-enter the allocator.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded; `ptr` came from `System` with `layout`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            count(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The most this thread had allocated at once while `f` ran, beyond what was live before.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    let peak = PEAK.with(Cell::get) - base;
    (out, peak.max(0) as u64)
}

/// A frame header announcing `len` payload bytes (and more frames, if `more`).
fn header(len: u32, more: bool) -> Vec<u8> {
    let mut h = Message::new(MessageKind::Reply, ContentKind::Binary, Vec::new())
        .to_frames(&Limits::DEFAULT)
        .unwrap();
    h[8] = u8::from(more);
    h[12..16].copy_from_slice(&len.to_le_bytes());
    h
}

#[test]
fn a_frame_announcing_a_mebibyte_costs_the_bytes_that_came() {
    let mut input = header(MAX_FRAME as u32, true);
    input.extend_from_slice(&[7; 100]);
    let (progress, peak) = peak_of(|| {
        let mut d = Decoder::new(Limits::DEFAULT);
        let p = d.feed(&input).unwrap();
        (p.consumed, p.output.is_none(), d.finish().is_err())
    });
    assert_eq!(progress, (HEADER_LEN + 100, true, true));
    assert!(peak < 4096, "{peak} bytes for 100 received");
}

#[test]
fn a_connection_fed_headers_of_a_64_mib_message_holds_what_was_sent() {
    let (front, mut agent) = UnixStream::pair().unwrap();
    let opts = Options::default()
        .with_handshake_timeout(Duration::from_secs(5))
        .with_silence_timeout(Duration::from_millis(200));
    let peer = std::thread::spawn(move || {
        let hello = Hello::new("n", 1);
        let hs = mpir_wire::AgentHandshake::new(&hello).take_outgoing();
        agent.write_all(&hs).unwrap();
        // Three whole frames of one message announced as 64 × 1 MiB, then a header and silence.
        for _ in 0..3 {
            agent.write_all(&header(MAX_FRAME as u32, true)).unwrap();
            agent.write_all(&vec![1; MAX_FRAME]).unwrap();
        }
        agent.write_all(&header(MAX_FRAME as u32, true)).unwrap();
        std::thread::sleep(Duration::from_millis(600));
        agent
    });
    let (result, peak) = peak_of(|| {
        let mut conn = Connection::front_end(front, &Gate::Engine(AgentId(1)), &opts)
            .unwrap()
            .connection;
        conn.recv()
    });
    assert!(
        matches!(result, Err(WireError::Timeout { .. })),
        "{result:?}"
    );
    // 3 MiB received (a growing buffer may hold up to twice that), plus the 64 KiB read buffer;
    // the 64 MiB announced are never reserved.
    assert!(peak < 8 << 20, "{peak} bytes for 3 MiB received");
    drop(peer.join().unwrap());
}

#[test]
fn an_endless_token_reader_is_read_to_its_bound() {
    let (result, peak) = peak_of(|| Token::read_from(std::io::repeat(b'f')));
    assert!(result.is_err());
    assert!(peak < 1024, "{peak}");
}
