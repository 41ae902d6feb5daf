//! How a library — the C API, the Python module — reaches a job's other nodes: with the
//! options `mpir` takes (the launch template, the agent program, the fanout, the address
//! agents connect back to, the token directory, the timeout), through the same
//! [`reach`](crate::reach). One difference: a library has no program of its own to start as
//! the agent, so the agent is the `mpir` program named, else the first `mpir` on the `PATH`.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use mpir_session::{NodeState, Session};

use crate::error::FrontEndError;
use crate::front::reach;
use crate::launch::Launch;
use crate::options::FrontEndOptions;

/// A library's choice of how other nodes are reached. By default they are, when the job has
/// ranks there, an engine is known to reach them and an `mpir` program is found; a default
/// that cannot be met leaves those ranks unread (each says it is on another node), while a
/// setting the caller made ([`program`](OtherNodeOptions::program),
/// [`launch`](OtherNodeOptions::launch)) that cannot be met is an error.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OtherNodeOptions {
    /// Whether other nodes are read at all (default yes).
    pub enabled: bool,
    /// The `mpir` program on the other nodes (default: the first `mpir` on the `PATH`, by
    /// its absolute path: one installation on a shared file system).
    pub program: Option<PathBuf>,
    /// A command template with `{host}` and `{agent}` (`mpir agent --agent-launch`); default:
    /// the job's own engine.
    pub launch: Option<String>,
    /// Most agents one program talks to (default 32).
    pub fanout: Option<u32>,
    /// Where agents that connect back connect.
    pub listen: Option<SocketAddr>,
    /// Where their one-time token files are made.
    pub token_dir: Option<PathBuf>,
    /// Longest wait for the agents to start, and for each answer.
    pub timeout: Option<Duration>,
}

impl Default for OtherNodeOptions {
    fn default() -> Self {
        OtherNodeOptions {
            enabled: true,
            program: None,
            launch: None,
            fanout: None,
            listen: None,
            token_dir: None,
            timeout: None,
        }
    }
}

impl OtherNodeOptions {
    /// Whether the caller chose how (a program or a template): then failing to is an error.
    fn chosen(&self) -> bool {
        self.program.is_some() || self.launch.is_some()
    }

    /// The front end's options, with `program` as the agent.
    fn front_end(&self, program: &Path) -> FrontEndOptions {
        let mut o = FrontEndOptions::default()
            .with_agent(vec![
                OsString::from(program.as_os_str()),
                OsString::from("agent"),
            ])
            .with_launch(match &self.launch {
                Some(t) => Launch::Template(t.clone()),
                None => Launch::Auto,
            });
        if let Some(f) = self.fanout {
            o = o.with_fanout(f);
        }
        if let Some(l) = self.listen {
            o = o.with_listen(l);
        }
        if let Some(d) = &self.token_dir {
            o = o.with_token_dir(d.clone());
        }
        if let Some(t) = self.timeout {
            o = o.with_start_timeout(t).with_request_timeout(t);
        }
        o
    }
}

/// Makes `session`'s other nodes part of it as `options` say ([`reach`]); the nodes' states
/// (empty when no other node is read).
///
/// # Errors
/// As [`reach`], when the caller chose a program or a template;
/// [`FrontEndError::NoAgentProgram`] when the program named is not a file.
pub fn reach_from_library(
    session: &mut Session,
    options: &OtherNodeOptions,
) -> Result<Vec<NodeState>, FrontEndError> {
    if !options.enabled || session.ranks_elsewhere().is_empty() {
        return Ok(Vec::new());
    }
    let program = match &options.program {
        Some(p) if p.is_file() => p.clone(),
        Some(p) => {
            return Err(FrontEndError::NoAgentProgram {
                reason: format!("{} is not a file", p.display()),
            });
        }
        None => match std::env::var_os("PATH").and_then(|p| on_path(&p, "mpir")) {
            Some(p) => p,
            None if options.chosen() => {
                return Err(FrontEndError::NoAgentProgram {
                    reason: "none given, and no `mpir` on the PATH".into(),
                });
            }
            None => return Ok(Vec::new()),
        },
    };
    match reach(session, options.front_end(&program)) {
        Err(FrontEndError::NoEngine { .. }) if !options.chosen() => Ok(Vec::new()),
        other => other,
    }
}

/// An address agents connect back to, as a user writes it: `IP:PORT`, or an IP alone (an
/// ephemeral port); IPv6 with or without brackets.
///
/// # Errors
/// A message naming the text when it is no IP address.
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>()
        .or_else(|_| {
            s.trim_matches(|c| c == '[' || c == ']')
                .parse::<std::net::IpAddr>()
                .map(|ip| SocketAddr::new(ip, 0))
        })
        .map_err(|_| format!("{s:?} is not an IP address (with or without a port)"))
}

/// The first executable file `name` in the directories of `path` (a `PATH` value), by its
/// absolute path (relative directories are skipped).
fn on_path(path: &std::ffi::OsStr, name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_take_an_ip_with_or_without_a_port() {
        assert_eq!(parse_listen("10.1.2.3").unwrap().to_string(), "10.1.2.3:0");
        assert_eq!(
            parse_listen("10.1.2.3:4000").unwrap().to_string(),
            "10.1.2.3:4000"
        );
        assert_eq!(parse_listen("[::1]").unwrap().to_string(), "[::1]:0");
        assert_eq!(parse_listen("::1").unwrap().to_string(), "[::1]:0");
        assert!(parse_listen("node1").unwrap_err().contains("node1"));
        assert!(parse_listen("").is_err());
    }

    #[test]
    fn the_program_on_the_path_is_an_absolute_executable_file() {
        let dir = std::env::temp_dir().join(format!("mpir-agent-path-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("a")).unwrap();
        std::fs::create_dir_all(dir.join("b")).unwrap();
        // Not executable in a, executable in b: b's is found.
        std::fs::write(dir.join("a/mpir-probe"), "").unwrap();
        std::fs::write(dir.join("b/mpir-probe"), "").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.join("b/mpir-probe"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let path = std::env::join_paths(["relative".into(), dir.join("a"), dir.join("b")]).unwrap();
        let found = on_path(&path, "mpir-probe");
        assert_eq!(found, Some(dir.join("b/mpir-probe")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
