//! The debuginfod client against servers that misbehave: down, silent, stalling, serving another
//! build's file, a huge or endless body, a redirect loop, garbage. Each is a fake HTTP server on
//! 127.0.0.1 written here (a thread per connection, each bounded in time); every case checks the
//! typed error, the time it took, and that nothing unverified is left in the cache.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpir_target::debuginfo::debuginfod::{Artifact, DebuginfodError, FetchFailure, MAX_REDIRECTS};
use mpir_target::debuginfo::{DebugOptions, DebuginfodOptions, ElfFile, ProcessImages};
use mpir_target::testkit::{Scratch, scratch};

type Handler = dyn Fn(&str, &mut TcpStream) + Send + Sync;

/// A fake HTTP server: `handler(path, stream)` answers each request.
struct FakeServer {
    port: u16,
    hits: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeServer {
    fn start(handler: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let (h, s) = (Arc::clone(&hits), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            // Bounded: at most 64 connections per test.
            for conn in listener.incoming().take(64) {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = conn else { continue };
                h.fetch_add(1, Ordering::SeqCst);
                let handler = Arc::clone(&handler);
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
                    if let Some(path) = read_request(&mut stream) {
                        handler(&path, &mut stream);
                    }
                });
            }
        });
        FakeServer {
            port,
            hits,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port)); // wakes the accept loop
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The request's path, from a request head of at most 8 KiB.
fn read_request(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        if stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&head);
    let mut words = line.split_whitespace();
    (words.next()? == "GET").then_some(())?;
    words.next().map(str::to_string)
}

fn respond(stream: &mut TcpStream, status: &str, headers: &str, body: &[u8]) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n",
        body.len()
    );
    let _ = stream.write_all(body);
}

/// Two ELF files with different build-ids and no DWARF (system binaries).
fn two_elves() -> ((PathBuf, Vec<u8>), (PathBuf, Vec<u8>)) {
    let mut found = ["/usr/bin/true", "/usr/bin/env", "/usr/bin/cat", "/bin/ls"]
        .iter()
        .filter_map(|p| {
            let f = ElfFile::open(Path::new(p)).ok()?;
            Some((PathBuf::from(p), f.build_id()?.to_vec()))
        })
        .collect::<Vec<_>>();
    found.dedup_by(|a, b| a.1 == b.1);
    assert!(found.len() >= 2, "two system ELF files with build-ids");
    let b = found.remove(1);
    (found.remove(0), b)
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Options for one server and a fresh cache, with short bounds.
fn options(urls: &[String], cache: &Scratch) -> DebuginfodOptions {
    let mut o = DebuginfodOptions::enabled()
        .with_cache_dir(cache.join("cache"))
        .with_timeout(Duration::from_secs(1))
        .with_max_time(Duration::from_secs(5))
        .with_max_size(1 << 20);
    for u in urls {
        o = o.with_url(u.clone());
    }
    o
}

/// The one failure of a fetch from one server.
fn only_failure(errors: Vec<DebuginfodError>) -> (String, FetchFailure) {
    assert_eq!(errors.len(), 1, "{errors:?}");
    match errors.into_iter().next().unwrap() {
        DebuginfodError::Fetch { server, reason, .. } => (server, reason),
        e => panic!("not a fetch failure: {e}"),
    }
}

/// Files left under the cache (verified files only, never temporaries).
fn cache_files(cache: &Scratch) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(&cache.join("cache"), &mut out);
    out
}

#[test]
fn a_server_that_is_down_is_refused_at_once_then_skipped() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }; // closed: connections are refused
    let cache = scratch("dbgd-down");
    let ((_, id), _) = two_elves();
    let url = format!("http://127.0.0.1:{port}");
    let client = options(std::slice::from_ref(&url), &cache)
        .client()
        .unwrap();
    let t = Instant::now();
    let (server, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert_eq!(server, url);
    assert!(matches!(reason, FetchFailure::Unreachable(_)), "{reason:?}");
    // Asked again at once: skipped without a connection attempt.
    let (_, again) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert!(
        matches!(again, FetchFailure::RecentlyUnreachable(_)),
        "{again:?}"
    );
    assert!(cache_files(&cache).is_empty());
}

#[test]
fn a_silent_server_times_out_within_the_bound() {
    let server = FakeServer::start(|_, _| std::thread::sleep(Duration::from_secs(6)));
    let cache = scratch("dbgd-silent");
    let ((_, id), _) = two_elves();
    let client = options(&[server.url()], &cache).client().unwrap();
    let t = Instant::now();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    let took = t.elapsed();
    assert!(
        matches!(reason, FetchFailure::Timeout { after, .. } if after == Duration::from_secs(1)),
        "{reason:?}"
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert!(cache_files(&cache).is_empty());
}

#[test]
fn a_body_that_stalls_times_out() {
    let server = FakeServer::start(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n\x7fELF");
        std::thread::sleep(Duration::from_secs(6));
    });
    let cache = scratch("dbgd-stall");
    let ((_, id), _) = two_elves();
    let client = options(&[server.url()], &cache).client().unwrap();
    let t = Instant::now();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert!(matches!(reason, FetchFailure::Timeout { .. }), "{reason:?}");
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert!(cache_files(&cache).is_empty());
}

#[test]
fn a_file_of_another_build_is_refused_and_deleted() {
    let ((wanted, id), (other, other_id)) = two_elves();
    let bytes = std::fs::read(&other).unwrap();
    let server = FakeServer::start(move |_, s| respond(s, "200 OK", "", &bytes));
    let cache = scratch("dbgd-mismatch");
    let mut opts = options(&[server.url()], &cache);
    opts.max_size = Some(1 << 30);
    let client = opts.clone().client().unwrap();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert_eq!(
        reason,
        FetchFailure::BuildIdMismatch {
            found: hex(&other_id)
        }
    );
    assert!(cache_files(&cache).is_empty(), "{:?}", cache_files(&cache));

    // Through the debug-file search: no debug file, and a note naming server, id and reason.
    let mut debug = DebugOptions::default().with_debuginfod(opts);
    debug.debug_dirs.clear();
    let images = ProcessImages::from_files(&[(wanted, 0)], debug).unwrap();
    let image = &images.images()[0];
    assert!(image.debug_file().is_none());
    let note = image
        .notes()
        .iter()
        .find(|n| n.contains(&server.url()))
        .unwrap_or_else(|| panic!("no note: {:?}", image.notes()));
    assert!(
        note.contains(&hex(&id)) && note.contains("refused"),
        "{note}"
    );
    assert!(cache_files(&cache).is_empty());
}

#[test]
fn a_huge_content_length_is_refused_before_reading() {
    let server = FakeServer::start(|_, s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n");
        let _ = s.write_all(&[0u8; 65536]);
    });
    let cache = scratch("dbgd-huge");
    let ((_, id), _) = two_elves();
    let client = options(&[server.url()], &cache).client().unwrap();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert_eq!(
        reason,
        FetchFailure::TooLarge {
            limit: 1 << 20,
            claimed: Some(1_000_000_000_000)
        }
    );
    assert!(cache_files(&cache).is_empty());
}

#[test]
fn an_endless_body_is_cut_at_the_size_limit() {
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&sent);
    let server = FakeServer::start(move |_, s| {
        // No length, the connection closes the body: never, unless the client hangs up.
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
        let chunk = [0x41u8; 65536];
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(10) && s.write_all(&chunk).is_ok() {
            counter.fetch_add(chunk.len(), Ordering::SeqCst);
        }
    });
    let cache = scratch("dbgd-endless");
    let ((_, id), _) = two_elves();
    let client = options(&[server.url()], &cache).client().unwrap();
    let t = Instant::now();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert_eq!(
        reason,
        FetchFailure::TooLarge {
            limit: 1 << 20,
            claimed: None
        }
    );
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    // The client hung up near the limit: the server could push only what the socket buffers
    // hold beyond it.
    std::thread::sleep(Duration::from_millis(300));
    let pushed = sent.load(Ordering::SeqCst);
    assert!(pushed < 64 << 20, "server pushed {pushed} bytes");
    assert!(cache_files(&cache).is_empty());
}

#[test]
fn a_redirect_loop_stops() {
    let server =
        FakeServer::start(|path, s| respond(s, "302 Found", &format!("Location: {path}\r\n"), b""));
    let cache = scratch("dbgd-redirect");
    let ((_, id), _) = two_elves();
    let client = options(&[server.url()], &cache).client().unwrap();
    let t = Instant::now();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert_eq!(reason, FetchFailure::TooManyRedirects(MAX_REDIRECTS));
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    let hits = server.hits();
    assert!(
        hits as u32 <= MAX_REDIRECTS + 1,
        "{hits} requests for {MAX_REDIRECTS} redirects"
    );
    assert!(cache_files(&cache).is_empty());
}

#[test]
fn garbage_is_refused() {
    let ((_, id), _) = two_elves();
    // Not HTTP at all.
    let raw = FakeServer::start(|_, s| {
        let _ = s.write_all(b"\x00\x01\x02 this is not HTTP \xff\xfe\r\n\r\n");
    });
    let cache = scratch("dbgd-garbage");
    let client = options(&[raw.url()], &cache).client().unwrap();
    let t = Instant::now();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert!(
        matches!(
            reason,
            FetchFailure::Garbage(_) | FetchFailure::Unreachable(_)
        ),
        "{reason:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(4));
    // HTTP, but the body is not ELF.
    let text = FakeServer::start(|_, s| respond(s, "200 OK", "", b"<html>hello</html>"));
    let client = options(&[text.url()], &cache).client().unwrap();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert!(
        matches!(&reason, FetchFailure::Garbage(r) if r.contains("not ELF")),
        "{reason:?}"
    );
    // The right file, cut short: its header promises sections that are not there.
    let ((wanted, _), _) = two_elves();
    let head = std::fs::read(&wanted).unwrap()[..200].to_vec();
    let cut = FakeServer::start(move |_, s| respond(s, "200 OK", "", &head));
    let client = options(&[cut.url()], &cache).client().unwrap();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert!(
        matches!(&reason, FetchFailure::Garbage(r) if r.contains("not ELF")),
        "{reason:?}"
    );
    // A server error.
    let err = FakeServer::start(|_, s| respond(s, "500 Internal Server Error", "", b"oops"));
    let client = options(&[err.url()], &cache).client().unwrap();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert_eq!(reason, FetchFailure::Status(500));
    assert!(cache_files(&cache).is_empty());
}

#[test]
fn not_found_is_remembered_briefly() {
    let server = FakeServer::start(|_, s| respond(s, "404 Not Found", "", b"not here"));
    let cache = scratch("dbgd-404");
    let ((_, id), _) = two_elves();
    let client = options(&[server.url()], &cache).client().unwrap();
    let (_, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert_eq!(reason, FetchFailure::NotFound);
    let hits = server.hits();
    // Asked again: the negative-cache entry answers, the server is not asked.
    let errors = client.fetch(&id, Artifact::DebugInfo).unwrap_err();
    assert!(
        matches!(errors.as_slice(), [DebuginfodError::CachedMiss { .. }]),
        "{errors:?}"
    );
    assert_eq!(server.hits(), hits);
    let entry = client.cache_path(&id, Artifact::DebugInfo);
    assert_eq!(std::fs::metadata(&entry).unwrap().len(), 0);
    // The executable of the same build-id is another question.
    let (_, reason) = only_failure(client.fetch(&id, Artifact::Executable).unwrap_err());
    assert_eq!(reason, FetchFailure::NotFound);
}

#[test]
fn the_next_server_is_asked_and_the_cache_kept() {
    use std::os::unix::fs::PermissionsExt;
    let ((wanted, id), _) = two_elves();
    let bytes = std::fs::read(&wanted).unwrap();
    let wanted_path = format!("/buildid/{}/executable", hex(&id));
    let missing = FakeServer::start(|_, s| respond(s, "404 Not Found", "", b""));
    let good = FakeServer::start(move |path, s| {
        if path == wanted_path {
            respond(s, "200 OK", "", &bytes)
        } else {
            respond(s, "404 Not Found", "", b"")
        }
    });
    let cache = scratch("dbgd-two");
    let mut opts = options(&[missing.url(), good.url()], &cache);
    opts.max_size = Some(1 << 30);
    let client = opts.client().unwrap();
    let got = client.fetch(&id, Artifact::Executable).unwrap();
    assert_eq!(got.server.as_deref(), Some(good.url().as_str()));
    assert_eq!(got.path, client.cache_path(&id, Artifact::Executable));
    assert_eq!(
        std::fs::read(&got.path).unwrap(),
        std::fs::read(&wanted).unwrap()
    );
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&got.path), 0o600);
    assert_eq!(mode(got.path.parent().unwrap()), 0o700);
    // Both servers gone: the cache answers.
    drop((missing, good));
    let again = client.fetch(&id, Artifact::Executable).unwrap();
    assert_eq!((again.path, again.server), (got.path, None));
}

#[test]
fn a_damaged_cache_entry_is_fetched_again() {
    let ((wanted, id), (other, _)) = two_elves();
    let bytes = std::fs::read(&wanted).unwrap();
    let server = FakeServer::start(move |_, s| respond(s, "200 OK", "", &bytes));
    let cache = scratch("dbgd-damaged");
    let mut opts = options(&[server.url()], &cache);
    opts.max_size = Some(1 << 30);
    let client = opts.client().unwrap();
    let entry = client.cache_path(&id, Artifact::DebugInfo);
    std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
    std::fs::copy(&other, &entry).unwrap();
    let got = client.fetch(&id, Artifact::DebugInfo).unwrap();
    assert_eq!(got.server.as_deref(), Some(server.url().as_str()));
    assert_eq!(
        std::fs::read(&entry).unwrap(),
        std::fs::read(&wanted).unwrap()
    );
}

#[test]
fn threads_asking_for_one_file_download_it_once() {
    let ((wanted, id), _) = two_elves();
    let bytes = std::fs::read(&wanted).unwrap();
    let server = FakeServer::start(move |_, s| {
        std::thread::sleep(Duration::from_millis(300));
        respond(s, "200 OK", "", &bytes)
    });
    let cache = scratch("dbgd-threads");
    let mut opts = options(&[server.url()], &cache);
    opts.max_size = Some(1 << 30);
    let client = opts.client().unwrap();
    let got: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..6)
            .map(|_| scope.spawn(|| client.fetch(&id, Artifact::DebugInfo).unwrap()))
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    assert_eq!(server.hits(), 1);
    assert!(got.iter().all(|f| f.path == got[0].path));
    // One of them downloaded it; the others found it in the cache.
    assert_eq!(got.iter().filter(|f| f.server.is_some()).count(), 1);
}

#[test]
fn https_to_a_server_that_does_not_speak_tls_fails_cleanly() {
    let server = FakeServer::start(|_, s| respond(s, "200 OK", "", b"plain text"));
    let cache = scratch("dbgd-tls");
    let ((_, id), _) = two_elves();
    let url = format!("https://127.0.0.1:{}", server.port);
    let client = options(std::slice::from_ref(&url), &cache)
        .client()
        .unwrap();
    let t = Instant::now();
    let (name, reason) = only_failure(client.fetch(&id, Artifact::DebugInfo).unwrap_err());
    assert_eq!(name, url);
    assert!(
        matches!(
            reason,
            FetchFailure::Unreachable(_) | FetchFailure::Garbage(_) | FetchFailure::Timeout { .. }
        ),
        "{reason:?}"
    );
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    assert!(cache_files(&cache).is_empty());
}
