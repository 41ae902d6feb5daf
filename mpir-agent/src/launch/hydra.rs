//! MPICH's and Intel MPI's hydra ([`Launch::Hydra`]): a second hydra job, with the job's own
//! `mpiexec` and the way it reaches nodes. The fleet starts **one** such job for all the
//! agents it starts, one process per node ([`job_command`]: `-hosts H1,…,HN -ppn 1 -n N`),
//! whose agents connect back over TLS: hydra forwards standard input to its rank 0 only and
//! merges every process's standard output, so no agent could have a pipe of its own.
//! Measured with MPICH 4.0.2's hydra on the simulated cluster: `-hosts node2,node3,node4
//! -ppn 1 -n 3` puts one process on each node, and a process that exits with status 127
//! (no `PMI_Init`, as an agent) does not end the others (the job ends with the last,
//! status 127). The per-node form ([`command`], stdio forwarded) stays for
//! [`Launch::command`].

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use super::Launch;
use crate::error::FrontEndError;

/// Hydra's options that say how it reaches nodes (each takes a value).
const HYDRA_LAUNCHER_OPTIONS: &[&str] = &[
    "-launcher",
    "-launcher-exec",
    "-bootstrap",
    "-bootstrap-exec",
    "--launcher",
    "--launcher-exec",
    "--bootstrap",
    "--bootstrap-exec",
];

/// How hydra starter `pid` reaches nodes: its executable, its launcher options (from its
/// command line, bounded) and its launcher variables (from its environment).
pub(super) fn of(pid: u32) -> Result<Launch, FrontEndError> {
    use std::io::Read;
    let no = |reason: String| FrontEndError::NoEngine { reason };
    let mpiexec = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map_err(|e| no(format!("the hydra starter's executable (pid {pid}): {e}")))?;
    let mut raw = Vec::new();
    std::fs::File::open(format!("/proc/{pid}/cmdline"))
        .and_then(|f| f.take(1 << 20).read_to_end(&mut raw))
        .map_err(|e| no(format!("the hydra starter's command line (pid {pid}): {e}")))?;
    let words: Vec<String> = raw
        .split(|&b| b == 0)
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let mut options = Vec::new();
    let mut i = 1;
    while i < words.len() {
        let w = &words[i];
        if HYDRA_LAUNCHER_OPTIONS.contains(&w.as_str()) && i + 1 < words.len() {
            options.push(w.clone());
            options.push(words[i + 1].clone());
            i += 2;
            continue;
        }
        if let Some((k, _)) = w.split_once('=')
            && HYDRA_LAUNCHER_OPTIONS.contains(&k)
        {
            options.push(w.clone());
        }
        i += 1;
    }
    let env = mpir_acquire::live::environment(pid)
        .map_err(|e| no(format!("the hydra starter's environment: {e}")))?
        .into_iter()
        .filter(|(k, _)| k.starts_with("HYDRA_") || k.starts_with("I_MPI_HYDRA_"))
        .collect();
    Ok(Launch::Hydra {
        mpiexec,
        options,
        env,
        token_dir: None,
    })
}

/// The command that starts `agent` on `host` as a one-rank hydra job: `MPIEXEC [options]
/// -hosts HOST -n 1 AGENT…` with the starter's launcher variables.
pub(super) fn command(
    mpiexec: &Path,
    options: &[String],
    env: &[(String, String)],
    host: &str,
    agent: &[OsString],
) -> Command {
    let mut c = Command::new(mpiexec);
    c.args(options)
        .args(["-hosts", host, "-n", "1"])
        .args(agent)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    c
}

/// Longest `-hosts` list given on the command line; past it the hosts go to a host file
/// (`-f`), as one argument over 128 KiB is refused by Linux.
const INLINE_HOSTS: usize = 64 * 1024;

/// The command that starts `agent` on each of `hosts` as one hydra job, one process per
/// node: `MPIEXEC [options] -hosts H1,…,HN -ppn 1 -n N AGENT…` (or `-f LIST_FILE` for a long
/// list) with the starter's launcher variables, no standard input.
pub(super) fn job_command(
    mpiexec: &Path,
    options: &[String],
    env: &[(String, String)],
    hosts: &[String],
    agent: &[OsString],
    list_file: &Path,
) -> Result<Command, FrontEndError> {
    let n = hosts.len().to_string();
    let list = hosts.join(",");
    let mut c = Command::new(mpiexec);
    c.args(options);
    if list.len() <= INLINE_HOSTS {
        c.args(["-hosts", &list]);
    } else {
        std::fs::write(list_file, format!("{}\n", hosts.join("\n"))).map_err(|e| {
            FrontEndError::ToolDaemons {
                context: format!("writing the job's host file {}", list_file.display()),
                source: Box::new(e),
            }
        })?;
        c.arg("-f").arg(list_file);
    }
    c.args(["-ppn", "1", "-n", &n])
        .args(agent)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::super::tests::words;
    use super::*;

    #[test]
    fn a_hydra_jobs_agents_reuse_its_mpiexec_and_the_way_it_reaches_nodes() {
        // A stand-in for a hydra starter: its command line and environment are what count.
        // `/bin/sh` with a script it cannot end by exec'ing its last command: one exec from
        // spawn to the program whose /proc is read (a `python3` found on PATH may be a shim
        // that execs `env`, then a shell, then python: CI's was, and the test read `env`).
        let mut p = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30; :", "sh"])
            .args([
                "-launcher",
                "ssh",
                "-launcher-exec",
                "/x/nsrsh",
                "--bootstrap=rsh",
            ])
            .args([
                "-hosts",
                "node2,node3",
                "-n",
                "4",
                "./solver",
                "-launcher",
                "not-ours",
            ])
            .env("HYDRA_LAUNCHER_EXTRA_ARGS", "-q")
            .env("I_MPI_HYDRA_BOOTSTRAP", "ssh")
            .env("UNRELATED", "1")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        // Once it has exec'd (before that, /proc shows the test's own command line).
        let cmdline = format!("/proc/{}/cmdline", p.id());
        for _ in 0..500 {
            if std::fs::read(&cmdline).is_ok_and(|c| c.windows(9).any(|w| w == b"-launcher")) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let launch = of(p.id()).unwrap();
        let Launch::Hydra {
            mpiexec,
            options,
            env,
            ..
        } = &launch
        else {
            panic!("{launch:?}")
        };
        assert_eq!(
            mpiexec,
            &std::fs::read_link(format!("/proc/{}/exe", p.id())).unwrap()
        );
        // The launcher's options (a program argument spelled like one is taken too: the
        // command line does not say where hydra's options end; it only changes how the
        // agents' job is started, never what is read).
        assert_eq!(
            options[..5],
            [
                "-launcher",
                "ssh",
                "-launcher-exec",
                "/x/nsrsh",
                "--bootstrap=rsh"
            ]
        );
        assert!(env.contains(&("HYDRA_LAUNCHER_EXTRA_ARGS".into(), "-q".into())));
        assert!(env.contains(&("I_MPI_HYDRA_BOOTSTRAP".into(), "ssh".into())));
        assert!(!env.iter().any(|(k, _)| k == "UNRELATED"));
        let agent: Vec<OsString> = vec!["/shared/mpir".into(), "agent".into()];
        let c = launch.command("node3", &agent).unwrap();
        let w = words(&c);
        assert_eq!(
            &w[w.len() - 6..],
            ["-hosts", "node3", "-n", "1", "/shared/mpir", "agent"]
        );
        p.kill().unwrap();
        p.wait().unwrap();
    }

    #[test]
    fn a_dotted_node_is_one_hosts_argument() {
        let agent: Vec<OsString> = vec!["/shared/mpir".into(), "agent".into()];
        let c = command(
            Path::new("/usr/bin/mpiexec.hydra"),
            &["-launcher".into(), "ssh".into()],
            &[],
            "node1.cluster.example",
            &agent,
        );
        assert_eq!(
            words(&c),
            [
                "/usr/bin/mpiexec.hydra",
                "-launcher",
                "ssh",
                "-hosts",
                "node1.cluster.example",
                "-n",
                "1",
                "/shared/mpir",
                "agent"
            ]
        );
    }
}
