//! mpir-wire over real sockets and processes: TLS on 127.0.0.1, pipes, a child agent process.
//! One test binary; `child::role` is the agent side when this binary is re-run as a child.

mod child;
mod fuzz;
mod pipe;
mod tls;

use std::path::{Path, PathBuf};
use std::time::Duration;

use mpir_wire::{ContentKind, Message, MessageKind, Options, RequestId};

/// Options with short bounds, so a failing test fails fast.
pub(crate) fn quick() -> Options {
    Options::default()
        .with_handshake_timeout(Duration::from_secs(5))
        .with_silence_timeout(Duration::from_secs(10))
}

/// A request carrying `body` as JSON.
pub(crate) fn request(id: u64, body: &str) -> Message {
    Message::new(
        MessageKind::Request,
        ContentKind::Json,
        body.as_bytes().to_vec(),
    )
    .with_request(RequestId(id))
}

/// A private scratch directory (0700), removed on drop.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    /// A fresh directory named after `name` and this process.
    pub(crate) fn new(name: &str) -> Scratch {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("mpir-wire-it-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        Scratch(dir)
    }

    /// Its path.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
