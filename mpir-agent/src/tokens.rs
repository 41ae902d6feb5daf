//! The token directory shared by a front end and the agents that connect back to it
//! (tool-daemon engines: [`crate::engine`]).
//!
//! The front end makes a private directory (0700) inside a directory the nodes share
//! ([`crate::FrontEndOptions::token_dir`], default `~/.mpir/agent-tokens`), named
//! `<this node>-<pid>-<random>` ([`TokenDir`]), writes one one-time token per expected node
//! into `<node>.token` (0600, [`mpir_wire::Token::write_file`]), then [`TOKENS_ISSUED`] with
//! the address the agents connect to. The directory is removed when the front end is done
//! with it; one left by a front end killed meanwhile is removed by the next front end of the
//! same node (its pid no longer runs there). An agent takes its node's token file
//! (`find_token`; read once, deleted) — no secret is ever on a command line.

use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mpir_types::node::ThisNode;
use mpir_wire::Token;

use crate::error::{AgentError, FrontEndError};

/// The file a front end writes into its token directory once every token is in it: an agent
/// told to wait for its token waits for this file, then looks for its token once.
pub(crate) const TOKENS_ISSUED: &str = "issued";

/// The front end's address as written in `dir`'s [`TOKENS_ISSUED`]: one line, `IP:PORT`
/// (at most 128 bytes read; a link or anything but a regular file refused).
pub(crate) fn issued_address(dir: &Path) -> Result<SocketAddr, AgentError> {
    use std::io::Read;
    let path = dir.join(TOKENS_ISSUED);
    let bad = |why: String| AgentError::Setup {
        context: format!("reading the front end's address in {}", path.display()),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
    };
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(&path)
    }
    .map_err(|e| AgentError::Setup {
        context: format!("reading the front end's address in {}", path.display()),
        source: e,
    })?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err(bad("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(128)
        .read_to_end(&mut bytes)
        .map_err(|e| AgentError::Setup {
            context: format!("reading the front end's address in {}", path.display()),
            source: e,
        })?;
    let text = std::str::from_utf8(&bytes).map_err(|_| bad("not UTF-8".into()))?;
    let line = text.lines().next().unwrap_or_default().trim();
    line.parse()
        .map_err(|_| bad(format!("{line:?} is not an address (IP:PORT)")))
}

/// Waits (up to `wait`, polling) until `dir` holds [`TOKENS_ISSUED`]; `false` when it did
/// not come, or the directory went away (the front end ended).
pub(crate) fn wait_for_tokens(dir: &Path, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        if dir.join(TOKENS_ISSUED).is_file() {
            return true;
        }
        if !dir.is_dir() || Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The token file's name for `node` (as [`Token::write_file`] names it).
pub(crate) fn token_file_name(node: &str) -> String {
    Token::file_name(node)
}

/// What the look for this node's token in a token directory found ([`find_token`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// The token of node `name` (as the front end named it), in file `path`.
    Token {
        /// The node's name, as the front end named it.
        name: String,
        /// The token's file.
        path: PathBuf,
    },
    /// No token names this node.
    Nothing,
    /// Tokens of several nodes name this node, none of them exactly (`node7.a.example` and
    /// `node7.b.example` for a node that knows itself as `node7` only): none is taken, as the
    /// other may be the token of another node of the same short name.
    Ambiguous(Vec<String>),
}

/// This node's token file in `dir`: the one named after `node`, else the one named after
/// `PMIX_HOSTNAME` (set by PRRTE for its tool daemons), else `SLURMD_NODENAME` (set by Slurm
/// in a step's tasks), when it names this node, else the one
/// named after any of this node's names or addresses (at most 65,536 entries looked at).
pub(crate) fn find_token(dir: &Path, node: &str) -> Found {
    // PRRTE's name for the node, else Slurm's (an agent of a Slurm step: `SLURMD_NODENAME`,
    // the name the job's table and the step's node list use).
    let pmix = std::env::var("PMIX_HOSTNAME")
        .or_else(|_| std::env::var("SLURMD_NODENAME"))
        .ok();
    find_token_as(
        dir,
        node,
        pmix.as_deref(),
        &mpir_target::live::node::this_node(),
    )
}

/// [`find_token`] for a node with facts `here` and `PMIX_HOSTNAME` `pmix_hostname`.
fn find_token_as(dir: &Path, node: &str, pmix_hostname: Option<&str>, here: &ThisNode) -> Found {
    let at = |name: &str| Found::Token {
        name: name.to_string(),
        path: dir.join(token_file_name(name)),
    };
    if dir.join(token_file_name(node)).is_file() {
        return at(node);
    }
    // A PMIx tool daemon (Open MPI 5): the name PRRTE knows this node by, when this node's
    // facts agree that it is this node.
    if let Some(name) = pmix_hostname
        && !name.is_empty()
        && here.classify(Some(name)).is_local()
        && dir.join(token_file_name(name)).is_file()
    {
        return at(name);
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Found::Nothing;
    };
    let mut local: Vec<String> = entries
        .take(65_536)
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| Some(n.strip_suffix(".token")?.to_string()))
        .filter(|name| here.classify(Some(name)).is_local())
        .collect();
    local.sort();
    if local.len() > 1 {
        // A short name matches every domain's node of that name: only one of this node's
        // own names, as it knows them, settles which.
        let own = |name: &String| {
            let n = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
            here.names().contains(&n)
        };
        let exact: Vec<&String> = local.iter().filter(|n| own(n)).collect();
        if let [one] = exact[..] {
            return at(one);
        }
        return Found::Ambiguous(local);
    }
    local.first().map_or(Found::Nothing, |name| at(name))
}

/// The start of the names of a node's token directories: its name as a token file names it,
/// without the `.token` suffix (once: a host `x.token` is not host `x`).
fn dir_prefix(host: &str) -> String {
    let file = token_file_name(host);
    file.strip_suffix(".token").unwrap_or(&file).to_string()
}

/// A private directory of token files, removed (with whatever is left in it) when dropped.
#[derive(Debug)]
pub(crate) struct TokenDir(PathBuf);

impl TokenDir {
    /// A new directory (0700) inside `parent` (made 0700 when it does not exist).
    pub(crate) fn create(parent: &Path) -> Result<TokenDir, FrontEndError> {
        let err = |context: String, e: std::io::Error| FrontEndError::ToolDaemons {
            context,
            source: Box::new(e),
        };
        if !parent.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| err(format!("making {}", parent.display()), e))?;
        }
        let t = Token::generate().map_err(|e| FrontEndError::ToolDaemons {
            context: "naming the token directory".into(),
            source: Box::new(e),
        })?;
        let host = dir_prefix(mpir_target::live::node::this_node().display_name());
        sweep(parent, &host);
        let name = format!("{host}-{}-{}", std::process::id(), &t.to_hex()[..8]);
        let dir = parent.join(name);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| err(format!("making {}", dir.display()), e))?;
        // The umask may have taken bits away, never added: 0700 exactly.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| err(format!("setting {}'s mode", dir.display()), e))?;
        Ok(TokenDir(dir))
    }
}

/// Removes the token directories in `parent` that front ends of this node (`host`) left
/// when they were killed: named `<host>-<pid>-<random>`, their pid no longer running here
/// (a home shared by many nodes holds other nodes' too, whose pids mean nothing here; at
/// most 4,096 entries looked at).
fn sweep(parent: &Path, host: &str) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.take(4096).filter_map(Result::ok) {
        let name = e.file_name();
        let Some(rest) = name
            .to_str()
            .and_then(|n| n.strip_prefix(host)?.strip_prefix('-'))
        else {
            continue;
        };
        // Exactly `<pid>-<8 hex digits>` (a longer host name that starts with this one's
        // and a dash gives another shape).
        let Some(pid) = rest
            .split_once('-')
            .filter(|(_, r)| r.len() == 8 && r.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|(p, _)| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != 0 && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for TokenDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl TokenDir {
    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

/// The default parent of token directories: `~/.mpir/agent-tokens`.
pub(crate) fn default_token_parent() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".mpir").join("agent-tokens")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issued_address_is_read_bounded_and_refused_when_it_is_not_one() {
        let dir = std::env::temp_dir().join(format!("mpir-issued-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join(TOKENS_ISSUED);
        std::fs::write(&marker, "127.0.0.1:4242\n").unwrap();
        assert_eq!(
            issued_address(&dir).unwrap(),
            "127.0.0.1:4242".parse().unwrap()
        );
        std::fs::write(&marker, "[::1]:7\nmore").unwrap();
        assert_eq!(issued_address(&dir).unwrap(), "[::1]:7".parse().unwrap());
        // Empty (an older front end's marker), garbage, endless: errors naming the file.
        for bad in [String::new(), "node2:80".into(), "1".repeat(1 << 20)] {
            std::fs::write(&marker, &bad).unwrap();
            let e = issued_address(&dir).unwrap_err().to_string();
            assert!(e.contains(TOKENS_ISSUED), "{e}");
        }
        // A link is not followed.
        std::fs::remove_file(&marker).unwrap();
        let elsewhere = dir.join("elsewhere");
        std::fs::write(&elsewhere, "127.0.0.1:1\n").unwrap();
        std::os::unix::fs::symlink(&elsewhere, &marker).unwrap();
        assert!(issued_address(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn token_file_names_match_the_wire_crates() {
        let parent = std::env::temp_dir().join(format!("mpir-orte-{}", std::process::id()));
        let dir = TokenDir::create(&parent).unwrap();
        for node in ["node2", "n[1]; rm", ".hidden", "a.b-c_d"] {
            let t = Token::generate().unwrap();
            let path = t.write_file(&dir.0, node).unwrap();
            assert_eq!(path, dir.0.join(token_file_name(node)), "{node}");
        }
        let mode = std::fs::metadata(&dir.0).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        let kept = dir.0.clone();
        drop(dir);
        assert!(!kept.exists(), "the token directory is removed");
        let _ = std::fs::remove_dir_all(&parent);
    }

    #[test]
    fn token_directories_of_killed_front_ends_of_this_node_are_swept() {
        let parent = std::env::temp_dir().join(format!("mpir-orte-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&parent).unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let host = dir_prefix(mpir_target::live::node::this_node().display_name());
        let stale = parent.join(format!("{host}-{dead}-0badc0de"));
        let alive = parent.join(format!("{host}-{}-600dc0de", std::process::id()));
        let other = parent.join(format!("{host}x-{dead}-0badc0de"));
        // Node "<host>-<n>"'s directory (n: a pid this node does not run).
        let longer = parent.join(format!("{host}-{dead}-{dead}-0badc0de"));
        let unrelated = parent.join("notes");
        for d in [&stale, &alive, &other, &unrelated, &longer] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("node2.token"), "x").unwrap();
        }
        let fresh = TokenDir::create(&parent).unwrap();
        assert!(!stale.exists(), "a dead front end's tokens were left");
        for d in [&alive, &other, &unrelated, &longer, &fresh.0] {
            assert!(d.exists(), "{} was swept", d.display());
        }
        drop(fresh);
        let _ = std::fs::remove_dir_all(&parent);
    }

    /// A token directory holding tokens for `nodes`.
    fn tokens_for(tag: &str, nodes: &[&str]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mpir-find-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for n in nodes {
            std::fs::write(dir.join(token_file_name(n)), "x").unwrap();
        }
        dir
    }

    fn token(dir: &Path, name: &str) -> Found {
        Found::Token {
            name: name.into(),
            path: dir.join(token_file_name(name)),
        }
    }

    #[test]
    fn dotted_host_names_find_their_own_token() {
        let short = ThisNode::new().with_name("node7");
        let dir = tokens_for(
            "dotted",
            &["node7.cluster.example", "node70.cluster.example", "node8"],
        );
        // By the name the node goes by, else by a name the facts say is this node's.
        assert_eq!(
            find_token_as(&dir, "node7.cluster.example", None, &short),
            token(&dir, "node7.cluster.example")
        );
        assert_eq!(
            find_token_as(&dir, "node7", None, &short),
            token(&dir, "node7.cluster.example")
        );
        let fqdn = ThisNode::new().with_name("node7.cluster.example");
        assert_eq!(
            find_token_as(&dir, "node7.cluster.example.", None, &fqdn),
            token(&dir, "node7.cluster.example")
        );
        // PRRTE's name for the node, dots and all.
        assert_eq!(
            find_token_as(&dir, "nothing", Some("node7.cluster.example"), &short),
            token(&dir, "node7.cluster.example")
        );
        // Another domain's node of the same short name is not this one when the node knows
        // its own domain.
        let other = ThisNode::new()
            .with_name("node7")
            .with_name("node7.other.example");
        assert_eq!(find_token_as(&dir, "node7", None, &other), Found::Nothing);
        // Case and a final dot in the front end's name: found, named as the front end did.
        let dir = tokens_for("case", &["Node7.Cluster.Example."]);
        assert_eq!(
            find_token_as(&dir, "node7", None, &fqdn),
            token(&dir, "Node7.Cluster.Example.")
        );
        // A host whose name ends like a token file's.
        let dir = tokens_for("suffix", &["x.token"]);
        let x = ThisNode::new().with_name("x.token");
        assert_eq!(
            find_token_as(&dir, "x.token", None, &x),
            token(&dir, "x.token")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_short_name_that_two_domains_share_takes_no_token() {
        let dir = tokens_for("twins", &["node7.a.example", "node7.b.example"]);
        // Knowing only its short name, the node cannot tell which is its own.
        let short = ThisNode::new().with_name("node7");
        assert_eq!(
            find_token_as(&dir, "node7", None, &short),
            Found::Ambiguous(vec!["node7.a.example".into(), "node7.b.example".into()])
        );
        // Knowing its domain, it can.
        let b = ThisNode::new()
            .with_name("node7")
            .with_name("node7.b.example");
        assert_eq!(
            find_token_as(&dir, "node7", None, &b),
            token(&dir, "node7.b.example")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_dotted_hosts_sweep_leaves_other_hosts_directories() {
        let parent = std::env::temp_dir().join(format!("mpir-sweep-dots-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&parent);
        std::fs::create_dir_all(&parent).unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let dir = |host: &str| parent.join(format!("{host}-{dead}-0badc0de"));
        for h in ["x", "x.token", "node1", "node1.cluster.example"] {
            std::fs::create_dir(dir(h)).unwrap();
        }
        assert_eq!(dir_prefix("x.token"), "x.token");
        assert_eq!(dir_prefix("node1.cluster.example"), "node1.cluster.example");
        // Host `x.token` sweeps its own, never host `x`'s (whose pids mean nothing here).
        sweep(&parent, &dir_prefix("x.token"));
        assert!(!dir("x.token").exists());
        assert!(dir("x").exists());
        // A host and its fully qualified name are different directories' owners.
        sweep(&parent, &dir_prefix("node1.cluster.example"));
        assert!(!dir("node1.cluster.example").exists());
        assert!(dir("node1").exists());
        sweep(&parent, &dir_prefix("node1"));
        assert!(!dir("node1").exists());
        assert!(dir("x").exists());
        let _ = std::fs::remove_dir_all(&parent);
    }
}
