//! A debuginfod client: separate debug files (and executables) fetched by build-id from the
//! servers in `DEBUGINFOD_URLS`, as gdb and elfutils fetch them, into elfutils' cache layout.
//!
//! - Servers: `DEBUGINFOD_URLS` (space-separated, tried in order) unless
//!   [`DebuginfodOptions::urls`] names them. Off without servers; off when
//!   [`DebuginfodOptions::enabled`] is `Some(false)`, whatever the environment says.
//! - Requests: `GET <server>/buildid/<hex>/debuginfo` (or `/executable`), HTTP or HTTPS
//!   (rustls), at most [`MAX_REDIRECTS`] redirects.
//! - Bounds: `DEBUGINFOD_TIMEOUT` (seconds to connect and to receive the response headers,
//!   default [`DEFAULT_TIMEOUT`]), `DEBUGINFOD_MAXTIME` (seconds for the whole download, default
//!   [`DEFAULT_MAX_TIME`]), `DEBUGINFOD_MAXSIZE` (bytes, default [`DEFAULT_MAX_SIZE`]); a body is
//!   cut at the size limit whatever its `Content-Length` said.
//! - Cache: `$DEBUGINFOD_CACHE_PATH`, else `$XDG_CACHE_HOME/debuginfod_client`, else
//!   `$HOME/.cache/debuginfod_client`; files at `<cache>/<hex>/debuginfo` (directories 0700,
//!   files 0600), written to a temporary name and renamed once verified. A build-id that every
//!   server answered 404 for is remembered for [`NEGATIVE_CACHE_TIME`] as an empty file with no
//!   permissions (elfutils' own negative-cache entry).
//! - Verification: a downloaded file is used only if it is ELF and its build-id note is the one
//!   asked for; anything else is deleted and refused.
//! - A server that could not be reached (refused, timed out) is skipped for
//!   [`UNREACHABLE_BACKOFF`] by this process: the images of a process ask for dozens of files.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use thiserror::Error;

use super::locate::hex;

/// Connect and first-response timeout when `DEBUGINFOD_TIMEOUT` does not say (elfutils waits
/// 90 s; a tool attaching to a job should not).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on one whole download when `DEBUGINFOD_MAXTIME` does not say.
pub const DEFAULT_MAX_TIME: Duration = Duration::from_secs(600);
/// Largest file fetched when `DEBUGINFOD_MAXSIZE` does not say: 1 GiB (the debug files of the
/// largest C++ libraries are a few hundred MB).
pub const DEFAULT_MAX_SIZE: u64 = 1 << 30;
/// Redirects followed per request.
pub const MAX_REDIRECTS: u32 = 8;
/// How long a build-id that no server has is not asked for again (elfutils' `cache_miss_s`).
pub const NEGATIVE_CACHE_TIME: Duration = Duration::from_secs(600);
/// Longest build-id asked for, in bytes (GNU ld writes 20, other linkers 8 to 32).
pub const MAX_BUILD_ID: usize = 64;
/// How long this process skips a server it could not reach.
pub const UNREACHABLE_BACKOFF: Duration = Duration::from_secs(60);

/// What to fetch for a build-id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Artifact {
    /// The separate debug file (`/buildid/<id>/debuginfo`).
    DebugInfo,
    /// The image file itself (`/buildid/<id>/executable`).
    Executable,
}

impl Artifact {
    /// The last segment of the request path, and the file name in the cache.
    pub fn name(self) -> &'static str {
        match self {
            Artifact::DebugInfo => "debuginfo",
            Artifact::Executable => "executable",
        }
    }
}

impl std::fmt::Display for Artifact {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether and how debug files are fetched from debuginfod servers. Every field left at its
/// default defers to the environment, as gdb and elfutils do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DebuginfodOptions {
    /// `Some(false)`: never (whatever `DEBUGINFOD_URLS` says); `Some(true)`: with the servers of
    /// `urls` or `DEBUGINFOD_URLS`; `None`: when some server is named.
    pub enabled: Option<bool>,
    /// Servers to ask, in order, instead of `DEBUGINFOD_URLS`.
    pub urls: Vec<String>,
    /// Cache directory instead of `DEBUGINFOD_CACHE_PATH` and the XDG default.
    pub cache_dir: Option<PathBuf>,
    /// Connect and first-response timeout instead of `DEBUGINFOD_TIMEOUT`.
    pub timeout: Option<Duration>,
    /// Bound on a whole download instead of `DEBUGINFOD_MAXTIME`.
    pub max_time: Option<Duration>,
    /// Largest file accepted instead of `DEBUGINFOD_MAXSIZE`.
    pub max_size: Option<u64>,
}

impl DebuginfodOptions {
    /// Never fetch, whatever the environment says.
    pub fn disabled() -> Self {
        DebuginfodOptions {
            enabled: Some(false),
            ..Default::default()
        }
    }

    /// Fetch from the servers of `DEBUGINFOD_URLS` (or those added with
    /// [`with_url`](DebuginfodOptions::with_url)).
    pub fn enabled() -> Self {
        DebuginfodOptions {
            enabled: Some(true),
            ..Default::default()
        }
    }

    /// Adds a server, asked after those already listed (and instead of `DEBUGINFOD_URLS`).
    pub fn with_url(mut self, url: impl Into<String>) -> Self {
        self.urls.push(url.into());
        self
    }

    /// Uses `dir` as the cache.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Sets the connect and first-response timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the bound on a whole download.
    pub fn with_max_time(mut self, max_time: Duration) -> Self {
        self.max_time = Some(max_time);
        self
    }

    /// Sets the largest file accepted.
    pub fn with_max_size(mut self, bytes: u64) -> Self {
        self.max_size = Some(bytes);
        self
    }

    /// The client these options and the environment describe, or `None` when fetching is off
    /// (no server named, or disabled).
    pub fn client(&self) -> Option<DebuginfodClient> {
        self.client_with_env(|k| std::env::var(k).ok())
    }

    /// [`client`](DebuginfodOptions::client) with the environment given by `env`.
    pub(crate) fn client_with_env(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Option<DebuginfodClient> {
        if self.enabled == Some(false) {
            return None;
        }
        let urls: Vec<String> = if self.urls.is_empty() {
            env("DEBUGINFOD_URLS")
                .unwrap_or_default()
                .split_whitespace()
                .map(str::to_string)
                .collect()
        } else {
            self.urls.clone()
        };
        let servers: Vec<String> = urls
            .iter()
            .map(|u| u.trim().trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty())
            .collect();
        if servers.is_empty() {
            return None;
        }
        let secs = |k: &str| {
            env(k)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|&s| s > 0)
                .map(Duration::from_secs)
        };
        let cache_dir = self.cache_dir.clone().or_else(|| default_cache_dir(&env))?;
        Some(DebuginfodClient {
            servers,
            cache_dir,
            timeout: self
                .timeout
                .or_else(|| secs("DEBUGINFOD_TIMEOUT"))
                .unwrap_or(DEFAULT_TIMEOUT),
            max_time: self
                .max_time
                .or_else(|| secs("DEBUGINFOD_MAXTIME"))
                .unwrap_or(DEFAULT_MAX_TIME),
            max_size: self
                .max_size
                .or_else(|| {
                    env("DEBUGINFOD_MAXSIZE")
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .filter(|&s| s > 0)
                })
                .unwrap_or(DEFAULT_MAX_SIZE),
        })
    }
}

/// elfutils' cache directory: `$DEBUGINFOD_CACHE_PATH`, `$XDG_CACHE_HOME/debuginfod_client`,
/// `$HOME/.cache/debuginfod_client`.
fn default_cache_dir(env: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    set("DEBUGINFOD_CACHE_PATH")
        .or_else(|| set("XDG_CACHE_HOME").map(|d| d.join("debuginfod_client")))
        .or_else(|| set("HOME").map(|d| d.join(".cache").join("debuginfod_client")))
}

/// Why one server did not give a usable file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum FetchFailure {
    /// The server has no such file (HTTP 404).
    #[error("not found on the server")]
    NotFound,
    /// The connection could not be made or broke off.
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// Skipped: the server could not be reached a moment ago.
    #[error("skipped: unreachable {0:?} ago")]
    RecentlyUnreachable(Duration),
    /// A timeout expired.
    #[error("timed out ({what} after {after:?})")]
    Timeout {
        /// Which bound (connect, response, whole download).
        what: String,
        /// The bound.
        after: Duration,
    },
    /// More redirects than [`MAX_REDIRECTS`].
    #[error("more than {0} redirects")]
    TooManyRedirects(u32),
    /// The file is larger than the size limit (by its `Content-Length`, or cut while reading).
    #[error("larger than the limit of {limit} bytes{}", .claimed.map_or_else(String::new, |c| format!(" (Content-Length {c})")))]
    TooLarge {
        /// The limit.
        limit: u64,
        /// The size the server announced, if it did.
        claimed: Option<u64>,
    },
    /// Another HTTP status than 200 or 404.
    #[error("HTTP status {0}")]
    Status(u16),
    /// The answer is not HTTP, or not an ELF file.
    #[error("bad answer: {0}")]
    Garbage(String),
    /// An ELF file whose build-id is not the one asked for.
    #[error("the file's build-id is {found}, not the one asked for: refused and deleted")]
    BuildIdMismatch {
        /// The build-id in the file (`none` when it has none).
        found: String,
    },
    /// The server's address is not an `http://` or `https://` URL.
    #[error("unsupported URL (only http:// and https://)")]
    UnsupportedUrl,
    /// This build of the crate has no HTTP client (the `debuginfod` feature is off).
    #[error("this build has no debuginfod support (feature `debuginfod`)")]
    NoHttp,
}

/// A file that could not be fetched from one server, or a cache problem.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DebuginfodError {
    /// One server did not give a usable file.
    #[error("debuginfod {server}: {artifact} of build-id {build_id}: {reason}")]
    Fetch {
        /// The server's URL.
        server: String,
        /// The build-id, in hex.
        build_id: String,
        /// What was asked for.
        artifact: Artifact,
        /// Why it was not used.
        reason: FetchFailure,
    },
    /// No server has the file: remembered from an earlier answer (negative cache).
    #[error(
        "debuginfod: {artifact} of build-id {build_id}: no server had it {age:?} ago (cached at {path})"
    )]
    CachedMiss {
        /// The build-id, in hex.
        build_id: String,
        /// What was asked for.
        artifact: Artifact,
        /// How long ago it was recorded.
        age: Duration,
        /// The negative-cache entry.
        path: PathBuf,
    },
    /// The build-id is too short or too long to be one (an image's note can say anything):
    /// no server is asked, no cache path made from it.
    #[error(
        "debuginfod: build-id {build_id:?} ({len} bytes) is not one to ask for (2 to {MAX_BUILD_ID} bytes)"
    )]
    UnusableBuildId {
        /// The build-id, in hex.
        build_id: String,
        /// Its length in bytes.
        len: usize,
    },
    /// The cache directory could not be used.
    #[error("debuginfod cache {path}: {reason}")]
    Cache {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's reason.
        reason: String,
    },
}

/// A file fetched, or found in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Fetched {
    /// The file in the cache.
    pub path: PathBuf,
    /// The server it came from; `None` when it was already in the cache.
    pub server: Option<String>,
}

/// A resolved debuginfod configuration: servers, cache and bounds
/// ([`DebuginfodOptions::client`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebuginfodClient {
    servers: Vec<String>,
    cache_dir: PathBuf,
    timeout: Duration,
    max_time: Duration,
    max_size: u64,
}

impl DebuginfodClient {
    /// The servers, in the order they are asked.
    pub fn servers(&self) -> &[String] {
        &self.servers
    }

    /// The cache directory.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// Connect and first-response timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Bound on a whole download.
    pub fn max_time(&self) -> Duration {
        self.max_time
    }

    /// Largest file accepted.
    pub fn max_size(&self) -> u64 {
        self.max_size
    }

    /// Where `artifact` of `build_id` is kept in the cache.
    pub fn cache_path(&self, build_id: &[u8], artifact: Artifact) -> PathBuf {
        self.cache_dir.join(hex(build_id)).join(artifact.name())
    }

    /// `artifact` of `build_id`: from the cache, else from the first server that has it (each
    /// download verified: ELF, with that build-id). On failure, one error per server tried
    /// (or the remembered miss, or the cache's problem).
    pub fn fetch(
        &self,
        build_id: &[u8],
        artifact: Artifact,
    ) -> Result<Fetched, Vec<DebuginfodError>> {
        let result = self.fetch_unlogged(build_id, artifact);
        #[cfg(feature = "debuginfod")]
        if let Err(errors) = &result {
            for e in errors {
                tracing::info!("{e}");
            }
        }
        result
    }

    fn fetch_unlogged(
        &self,
        build_id: &[u8],
        artifact: Artifact,
    ) -> Result<Fetched, Vec<DebuginfodError>> {
        if !(2..=MAX_BUILD_ID).contains(&build_id.len()) {
            return Err(vec![DebuginfodError::UnusableBuildId {
                build_id: hex(&build_id[..build_id.len().min(MAX_BUILD_ID)]),
                len: build_id.len(),
            }]);
        }
        let id = hex(build_id);
        let target = self.cache_path(build_id, artifact);
        // One download per file at a time: the ranks of a job, opened on several threads, map
        // the same libraries. The others wait, then find it in the cache.
        let _only_one = InFlight::claim(&target);
        let dir = self.cache_dir.join(&id);
        let cache_err = |path: &Path, e: std::io::Error| {
            vec![DebuginfodError::Cache {
                path: path.to_path_buf(),
                reason: e.to_string(),
            }]
        };
        match std::fs::symlink_metadata(&target) {
            Ok(meta) if meta.is_file() && meta.len() > 0 => {
                match verify(&target, build_id) {
                    Ok(()) => {
                        return Ok(Fetched {
                            path: target,
                            server: None,
                        });
                    }
                    // A cache entry that is not the file asked for (damaged, replaced): gone.
                    Err(_) => {
                        let _ = std::fs::remove_file(&target);
                    }
                }
            }
            Ok(meta) if meta.is_file() => {
                let age = meta
                    .modified()
                    .ok()
                    .and_then(|m| SystemTime::now().duration_since(m).ok())
                    .unwrap_or_default();
                if age < NEGATIVE_CACHE_TIME {
                    return Err(vec![DebuginfodError::CachedMiss {
                        build_id: id,
                        artifact,
                        age,
                        path: target,
                    }]);
                }
                let _ = std::fs::remove_file(&target);
            }
            _ => {}
        }
        make_private_dir(&dir).map_err(|e| cache_err(&dir, e))?;
        let mut errors = Vec::new();
        for server in &self.servers {
            let fail = |reason| DebuginfodError::Fetch {
                server: server.clone(),
                build_id: id.clone(),
                artifact,
                reason,
            };
            if let Some(ago) = unreachable_since(server) {
                errors.push(fail(FetchFailure::RecentlyUnreachable(ago)));
                continue;
            }
            let url = format!("{server}/buildid/{id}/{artifact}");
            let tmp = dir.join(format!(
                ".{artifact}.{}.{}.tmp",
                std::process::id(),
                next_serial()
            ));
            let outcome = match create_private_file(&tmp) {
                Ok(file) => self
                    .download(&url, file)
                    .and_then(|()| verify(&tmp, build_id)),
                Err(e) => {
                    errors.extend(cache_err(&tmp, e));
                    return Err(errors);
                }
            };
            match outcome {
                Ok(()) => {
                    if let Err(e) = std::fs::rename(&tmp, &target) {
                        let _ = std::fs::remove_file(&tmp);
                        errors.extend(cache_err(&target, e));
                        return Err(errors);
                    }
                    return Ok(Fetched {
                        path: target,
                        server: Some(server.clone()),
                    });
                }
                Err(reason) => {
                    let _ = std::fs::remove_file(&tmp);
                    if matches!(
                        reason,
                        FetchFailure::Unreachable(_) | FetchFailure::Timeout { .. }
                    ) {
                        mark_unreachable(server);
                    }
                    errors.push(fail(reason));
                }
            }
        }
        let all_missing = errors.iter().all(|e| {
            matches!(
                e,
                DebuginfodError::Fetch {
                    reason: FetchFailure::NotFound,
                    ..
                }
            )
        });
        if all_missing && !errors.is_empty() {
            // elfutils' negative-cache entry: empty, no permissions.
            if create_private_file(&target).is_ok() {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o000));
            }
        }
        Err(errors)
    }

    /// GETs `url` into `file`, within the time and size bounds.
    #[cfg(feature = "debuginfod")]
    fn download(&self, url: &str, file: std::fs::File) -> Result<(), FetchFailure> {
        http::download(self, url, file)
    }

    #[cfg(not(feature = "debuginfod"))]
    fn download(&self, _url: &str, _file: std::fs::File) -> Result<(), FetchFailure> {
        Err(FetchFailure::NoHttp)
    }
}

/// Checks that `path` is ELF with build-id `id`.
fn verify(path: &Path, id: &[u8]) -> Result<(), FetchFailure> {
    use object::{Object, ReadCache};
    let not_elf = |e: &dyn std::fmt::Display| FetchFailure::Garbage(format!("not ELF ({e})"));
    let file = crate::files::open_regular(path).map_err(|e| not_elf(&e))?;
    // Only the headers and the note sections are read (a debug file can be hundreds of MB).
    let cache = ReadCache::new(file);
    let obj = object::File::parse(&cache).map_err(|e| not_elf(&e))?;
    if obj.format() != object::BinaryFormat::Elf {
        return Err(not_elf(&format_args!("{:?} file", obj.format())));
    }
    match obj.build_id().map_err(|e| not_elf(&e))? {
        Some(found) if found == id => Ok(()),
        found => Err(FetchFailure::BuildIdMismatch {
            found: found.map_or_else(|| "none".into(), hex),
        }),
    }
}

fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

fn create_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

fn next_serial() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    SERIAL.fetch_add(1, Ordering::Relaxed)
}

/// The cache files being fetched by some thread of this process.
struct InFlight(PathBuf);

type InFlightSet = (
    std::sync::Mutex<std::collections::HashSet<PathBuf>>,
    std::sync::Condvar,
);

fn in_flight() -> &'static InFlightSet {
    static SET: std::sync::OnceLock<InFlightSet> = std::sync::OnceLock::new();
    SET.get_or_init(Default::default)
}

impl InFlight {
    /// Waits until no other thread fetches `path`, then marks it as ours until dropped.
    fn claim(path: &Path) -> InFlight {
        let (set, changed) = in_flight();
        let mut busy = set.lock().unwrap_or_else(|e| e.into_inner());
        while busy.contains(path) {
            busy = changed.wait(busy).unwrap_or_else(|e| e.into_inner());
        }
        busy.insert(path.to_path_buf());
        InFlight(path.to_path_buf())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let (set, changed) = in_flight();
        set.lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.0);
        changed.notify_all();
    }
}

type Unreachable = std::sync::Mutex<std::collections::HashMap<String, Instant>>;

fn unreachable_servers() -> &'static Unreachable {
    static DOWN: std::sync::OnceLock<Unreachable> = std::sync::OnceLock::new();
    DOWN.get_or_init(Default::default)
}

/// How long ago `server` was found unreachable, if within [`UNREACHABLE_BACKOFF`].
fn unreachable_since(server: &str) -> Option<Duration> {
    let mut down = unreachable_servers()
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let ago = down.get(server)?.elapsed();
    if ago < UNREACHABLE_BACKOFF {
        return Some(ago);
    }
    down.remove(server);
    None
}

fn mark_unreachable(server: &str) {
    unreachable_servers()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(server.to_string(), Instant::now());
}

#[cfg(feature = "debuginfod")]
mod http;

#[cfg(test)]
mod tests;
