//! The client against hostile servers and directories: a fake server is a thread of this test
//! process listening on `<pid>.sock` in a private temporary directory, so its `SO_PEERCRED`
//! pid is this process's (asking for another pid is a peer mismatch). Every failure must be a
//! typed error within the timeout, never a panic or a hang. The real server (the preload
//! library in an MPI job) is tested by mpir-waits' `tests/coop.rs`.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use zerocopy::IntoBytes;

use super::wire::{self, Answer, Opcode};
use super::{CoopClient, CoopError, DirProblem, announcements_in, check_dir, own_euid};

const TIMEOUT: Duration = Duration::from_millis(500);

/// A private directory (0700) for one test, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("mpir-coop-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn me() -> u32 {
    std::process::id()
}

/// A fake server for socket `<pid>.sock` in `dir`: accepts one connection, reads one request
/// and hands both to `behave`.
fn fake(
    dir: &Path,
    pid: u32,
    behave: impl FnOnce(UnixStream, wire::Request) + Send + 'static,
) -> JoinHandle<()> {
    let listener = UnixListener::bind(dir.join(format!("{pid}.sock"))).unwrap();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut q = [0u8; 32];
        if s.read_exact(&mut q).is_err() {
            return;
        }
        let q = zerocopy::FromBytes::read_from_bytes(&q).unwrap();
        behave(s, q);
    })
}

fn header(status: u32, length: u64) -> Vec<u8> {
    Answer {
        magic: wire::MAGIC,
        version: wire::VERSION.into(),
        status: status.into(),
        length: length.into(),
    }
    .as_bytes()
    .to_vec()
}

fn client(dir: &Dir) -> CoopClient {
    CoopClient::connect_in(&dir.0, own_euid().unwrap(), me(), TIMEOUT).unwrap()
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Unix sockets and threads of a fake server: Miri's isolation has no sockets (HARDENING.md, section Miri)"
)]
fn garbage_wrong_magic_and_version_are_typed() {
    let dir = Dir::new("garbage");
    let t = fake(&dir.0, me(), |mut s, _| {
        let _ = s.write_all(&[0x5a; 24]);
    });
    let e = client(&dir).hello().unwrap_err();
    assert!(
        matches!(
            e,
            CoopError::Garbage {
                op: Opcode::Hello,
                ..
            }
        ),
        "{e}"
    );
    t.join().unwrap();

    let dir = Dir::new("version");
    let t = fake(&dir.0, me(), |mut s, _| {
        let mut h = header(0, 0);
        h[8] = 2;
        let _ = s.write_all(&h);
    });
    let e = client(&dir).maps().unwrap_err();
    assert!(
        matches!(e, CoopError::Garbage { what, .. } if what.contains("version")),
        "{e}"
    );
    t.join().unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Unix sockets and threads of a fake server: Miri's isolation has no sockets (HARDENING.md, section Miri)"
)]
fn a_huge_length_is_refused_before_reading_it() {
    let dir = Dir::new("huge");
    let t = fake(&dir.0, me(), |mut s, _| {
        let _ = s.write_all(&header(0, 1 << 40));
    });
    let start = Instant::now();
    let e = client(&dir).threads().unwrap_err();
    assert!(
        matches!(e, CoopError::TooLarge { len, max, .. } if len == 1 << 40 && max < 1 << 27),
        "{e}"
    );
    assert!(start.elapsed() < TIMEOUT, "refused at once");
    t.join().unwrap();
    // An error answer is allowed 64 bytes at most.
    let dir = Dir::new("huge-error");
    let t = fake(&dir.0, me(), |mut s, _| {
        let _ = s.write_all(&header(5, 65));
    });
    let e = client(&dir).maps().unwrap_err();
    assert!(matches!(e, CoopError::TooLarge { max: 64, .. }), "{e}");
    t.join().unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Unix sockets and threads of a fake server: Miri's isolation has no sockets (HARDENING.md, section Miri)"
)]
fn a_stalling_or_dribbling_server_times_out_within_the_deadline() {
    let dir = Dir::new("stall");
    let t = fake(&dir.0, me(), |s, _| {
        std::thread::sleep(TIMEOUT * 3);
        drop(s);
    });
    let start = Instant::now();
    let e = client(&dir).hello().unwrap_err();
    let took = start.elapsed();
    assert!(matches!(e, CoopError::Timeout { .. }), "{e}");
    assert!(took >= TIMEOUT && took < TIMEOUT * 2, "{took:?}");
    t.join().unwrap();

    // One byte every 100 ms: each read is quick, the whole answer is not.
    let dir = Dir::new("dribble");
    let t = fake(&dir.0, me(), |mut s, _| {
        let mut answer = header(0, 48);
        answer.extend_from_slice(&[0; 48]);
        for b in answer {
            if s.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    });
    let start = Instant::now();
    let e = client(&dir).hello().unwrap_err();
    let took = start.elapsed();
    assert!(matches!(e, CoopError::Timeout { .. }), "{e}");
    assert!(took < TIMEOUT * 2, "{took:?}");
    t.join().unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Unix sockets and threads of a fake server: Miri's isolation has no sockets (HARDENING.md, section Miri)"
)]
fn a_server_closing_mid_answer_is_closed_and_short_payloads_are_garbage() {
    let dir = Dir::new("closed");
    let t = fake(&dir.0, me(), |mut s, _| {
        let _ = s.write_all(&header(0, 100));
        let _ = s.write_all(&[1; 10]);
    });
    let e = client(&dir).maps().unwrap_err();
    assert!(
        matches!(
            e,
            CoopError::Closed {
                op: Opcode::Maps,
                ..
            }
        ),
        "{e}"
    );
    t.join().unwrap();

    // A HELLO whose lengths disagree with its size; then one naming another pid.
    for (name, exe_len, pid) in [("hello-len", 100u32, me()), ("hello-pid", 0, me() + 1)] {
        let dir = Dir::new(name);
        let t = fake(&dir.0, me(), move |mut s, _| {
            let mut h = wire::Hello {
                pid: pid.into(),
                ppid: 1.into(),
                uid: 0.into(),
                reserved: 0.into(),
                rank: (-1).into(),
                size: (-1).into(),
                start_time: 0.into(),
                exe_len: exe_len.into(),
                env_len: 0.into(),
            }
            .as_bytes()
            .to_vec();
            let mut a = header(0, h.len() as u64);
            a.append(&mut h);
            let _ = s.write_all(&a);
        });
        let e = client(&dir).hello().unwrap_err();
        assert!(matches!(e, CoopError::Garbage { .. }), "{name}: {e}");
        t.join().unwrap();
    }
    // A READ answering more than asked.
    let dir = Dir::new("read-more");
    let t = fake(&dir.0, me(), |mut s, q| {
        let n = q.arg1.get() + 1;
        let mut a = header(0, n);
        a.resize(a.len() + n as usize, 7);
        let _ = s.write_all(&a);
    });
    let mut buf = [0u8; 8];
    let e = client(&dir).read(0x1000, &mut buf).unwrap_err();
    assert!(matches!(e, CoopError::Garbage { .. }), "{e}");
    t.join().unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Unix sockets and threads of a fake server: Miri's isolation has no sockets (HARDENING.md, section Miri)"
)]
fn statuses_become_refusals_and_a_taken_signal_is_named() {
    let dir = Dir::new("ebusy");
    let t = fake(&dir.0, me(), |mut s, q| {
        assert_eq!(q.opcode.get(), 4);
        let mut a = header(16, 4);
        a.extend_from_slice(&62u32.to_le_bytes());
        let _ = s.write_all(&a);
    });
    let e = client(&dir).threads().unwrap_err();
    assert!(
        matches!(e, CoopError::SignalTaken { signal: 62, .. }),
        "{e}"
    );
    t.join().unwrap();

    let dir = Dir::new("einval");
    let t = fake(&dir.0, me(), |mut s, q| {
        assert_eq!(q.opcode.get(), 5);
        let _ = s.write_all(&header(22, 0));
    });
    let e = client(&dir).grant_ptracer().unwrap_err();
    assert!(
        matches!(
            e,
            CoopError::Refused {
                status: 22,
                op: Opcode::Ptracer,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("Invalid argument"), "{e}");
    t.join().unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Unix sockets and threads of a fake server: Miri's isolation has no sockets (HARDENING.md, section Miri)"
)]
fn a_server_that_is_not_the_pid_asked_is_refused() {
    let dir = Dir::new("peer");
    let other = me() + 100_000;
    let t = fake(&dir.0, other, |_, _| ());
    let e = CoopClient::connect_in(&dir.0, own_euid().unwrap(), other, TIMEOUT).unwrap_err();
    assert!(
        matches!(e, CoopError::WrongPeer { pid, found_pid, .. } if pid == other && found_pid == me() as i32),
        "{e}"
    );
    // Unblock the fake server's accept.
    drop(UnixStream::connect(dir.0.join(format!("{other}.sock"))));
    t.join().unwrap();
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Unix sockets and threads of a fake server: Miri's isolation has no sockets (HARDENING.md, section Miri)"
)]
fn directories_not_private_to_the_user_are_refused() {
    let uid = own_euid().unwrap();
    let dir = Dir::new("mode");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o755)).unwrap();
    let e = CoopClient::connect_in(&dir.0, uid, me(), TIMEOUT).unwrap_err();
    assert!(
        matches!(
            e,
            CoopError::NotOurs {
                problem: DirProblem::Mode { mode: 0o755 },
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(
        announcements_in(&dir.0, uid, TIMEOUT),
        Err(CoopError::NotOurs { .. })
    ));
    // Another owner: the same check with an expected uid that is not the directory's (no
    // chown needed, so it runs unprivileged too).
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    let e = CoopClient::connect_in(&dir.0, uid + 1, me(), TIMEOUT).unwrap_err();
    assert!(
        matches!(e, CoopError::NotOurs { problem: DirProblem::Owner { owner }, expected, .. } if owner == uid && expected == uid + 1),
        "{e}"
    );
    // Really owned by someone else (root can make it so).
    if uid == 0 {
        std::os::unix::fs::chown(&dir.0, Some(65534), None).unwrap();
        let e = CoopClient::connect_in(&dir.0, uid, me(), TIMEOUT).unwrap_err();
        assert!(
            matches!(
                e,
                CoopError::NotOurs {
                    problem: DirProblem::Owner { owner: 65534 },
                    ..
                }
            ),
            "{e}"
        );
        std::os::unix::fs::chown(&dir.0, Some(0), None).unwrap();
    }
    // A symbolic link to a good directory.
    let link = dir.0.with_extension("link");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&dir.0, &link).unwrap();
    let e = check_dir(&link, uid, me()).unwrap_err();
    assert!(
        matches!(
            e,
            CoopError::NotOurs {
                problem: DirProblem::Symlink,
                ..
            }
        ),
        "{e}"
    );
    let _ = std::fs::remove_file(&link);
    // No directory, no socket: no channel.
    let e = CoopClient::connect_in(&dir.0.join("absent"), uid, me(), TIMEOUT).unwrap_err();
    assert!(matches!(e, CoopError::NoChannel { .. }), "{e}");
    let e = CoopClient::connect_in(&dir.0, uid, me(), TIMEOUT).unwrap_err();
    assert!(matches!(e, CoopError::NoChannel { .. }), "{e}");
    assert!(
        announcements_in(&dir.0.join("absent"), uid, TIMEOUT)
            .unwrap()
            .is_empty()
    );
}

#[test]
#[cfg_attr(
    miri,
    ignore = "Unix sockets and threads of a fake server: Miri's isolation has no sockets (HARDENING.md, section Miri)"
)]
fn a_stale_socket_is_no_channel_in_announcements() {
    let dir = Dir::new("stale");
    // Bound and closed: nobody listens any more.
    drop(UnixListener::bind(dir.0.join("12345.sock")).unwrap());
    std::fs::write(dir.0.join("notapid.sock"), b"").unwrap();
    let all = announcements_in(&dir.0, own_euid().unwrap(), TIMEOUT).unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].0, 12345);
    assert!(
        matches!(all[0].1, Err(CoopError::NoChannel { .. })),
        "{all:?}"
    );
}
