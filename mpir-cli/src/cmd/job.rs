//! `launch`, `attach` and `core`: the job (MPIR proctable or MPI2DD traversal).

use std::borrow::Cow;
use std::os::fd::AsFd;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use mpir_acquire::live;
use mpir_acquire::{Interface, Job, RankControl, RankSelection};
use mpir_target::proctable::ProcTable;
use mpir_types::LayoutSource;
use mpir_types::mpir::{DebugState, MpirFlags};
use mpir_types::node::Locality;
use serde::Serialize;

use crate::{Common, acquire_options, chain};

/// `schema` of a job document (docs/cli-json.md).
pub(crate) const JOB_SCHEMA: &str = "mpir.job/1";

#[derive(Serialize, Clone)]
struct RankOut<'a> {
    rank: u64,
    host: Option<&'a str>,
    /// Whether `host` is this node: `null` when unknown (no usable host name, a core file).
    local: Option<bool>,
    executable: Option<&'a str>,
    pid: i64,
    /// "attached", "not_attached", "remote", "refused: …", or "failed: …".
    control: Cow<'a, str>,
}

/// One node of the job: a distinct host string as reported.
#[derive(Serialize)]
struct NodeOut<'a> {
    host: Option<&'a str>,
    local: Option<bool>,
    ranks: usize,
}

/// The facts that decided which hosts are this node.
#[derive(Serialize)]
struct ThisNodeOut<'a> {
    names: &'a [String],
    addresses: Vec<String>,
    aliases: &'a [String],
}

/// `MPIR_debug_state` as read: the raw value and its name in the spec (`"unknown"` for a
/// value the spec does not define).
#[derive(Serialize)]
struct DebugStateOut {
    raw: i64,
    name: &'static str,
}

#[derive(Serialize)]
struct StarterOut<'a> {
    pid: Option<u32>,
    image: Option<&'a str>,
    launcher: Option<String>,
    debug_state: Option<DebugStateOut>,
}

fn local_of(l: &Locality) -> Option<bool> {
    match l {
        Locality::Local(_) => Some(true),
        Locality::Remote => Some(false),
        _ => None,
    }
}

fn debug_state_out(raw: Option<i64>) -> Option<DebugStateOut> {
    raw.map(|raw| DebugStateOut {
        raw,
        name: match DebugState::from_raw(raw) {
            DebugState::Null => "null",
            DebugState::Spawned => "spawned",
            DebugState::Aborting => "aborting",
            _ => "unknown",
        },
    })
}

#[derive(Serialize)]
pub(crate) struct JobOut<'a> {
    /// Schema version of this document.
    schema: &'static str,
    starter: StarterOut<'a>,
    /// The interface the job was read through: "mpir" or "mpi2dd".
    interface: &'static str,
    /// Every interface the entry process exports (both when "mpir" and "mpi2dd" agree).
    interfaces: Vec<&'static str>,
    flags: Option<MpirFlags>,
    layout: &'static str,
    /// The job's nodes (distinct hosts), in order of first appearance.
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<Vec<NodeOut<'a>>>,
    /// What said which hosts are this node.
    #[serde(skip_serializing_if = "Option::is_none")]
    this_node: Option<ThisNodeOut<'a>>,
    ranks: Ranks<'a>,
    problems: Vec<String>,
    notes: Vec<String>,
}

/// The ranks of a job document. Serialized by serde like any list, except while [`print()`]
/// writes the document: then serde writes an empty list and `print` writes the ranks itself
/// in place of it, with the same bytes (a million ranks through serde's per-field path cost
/// twice the least a tool must do).
pub(crate) struct Ranks<'a> {
    source: RanksSource<'a>,
    elide: std::cell::Cell<bool>,
}

/// Where the ranks come from: a list (MPI2DD, cores), or an acquired job's table, turned into
/// [`RankOut`]s one at a time as they are written (a million-rank table is never copied).
enum RanksSource<'a> {
    List(Vec<RankOut<'a>>),
    Job(&'a Job),
}

impl<'a> From<Vec<RankOut<'a>>> for Ranks<'a> {
    fn from(list: Vec<RankOut<'a>>) -> Self {
        Ranks {
            source: RanksSource::List(list),
            elide: std::cell::Cell::new(false),
        }
    }
}

impl<'a> Ranks<'a> {
    fn of_job(job: &'a Job) -> Self {
        Ranks {
            source: RanksSource::Job(job),
            elide: std::cell::Cell::new(false),
        }
    }

    fn len(&self) -> usize {
        match &self.source {
            RanksSource::List(l) => l.len(),
            RanksSource::Job(j) => j.len(),
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = RankOut<'a>> + '_> {
        match &self.source {
            RanksSource::List(l) => Box::new(l.iter().map(|r| RankOut {
                control: r.control.clone(),
                ..*r
            })),
            RanksSource::Job(job) => Box::new(job.ranks().map(|r| RankOut {
                rank: r.rank,
                host: r.host,
                local: local_of(&job.locality(r.rank)),
                executable: r.executable,
                pid: r.pid,
                control: control_text(job, r.rank),
            })),
        }
    }
}

impl Serialize for Ranks<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.elide.get() {
            s.collect_seq(std::iter::empty::<()>())
        } else {
            s.collect_seq(self.iter())
        }
    }
}

/// Writes `value` as a JSON string: as is when nothing in it needs escaping (host and
/// program names, nearly always), else through serde_json.
fn json_str(w: &mut impl std::io::Write, value: &str) -> std::io::Result<()> {
    if value
        .bytes()
        .all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b != 0x7f)
    {
        w.write_all(b"\"")?;
        w.write_all(value.as_bytes())?;
        w.write_all(b"\"")
    } else {
        serde_json::to_writer(&mut *w, value).map_err(std::io::Error::other)
    }
}

/// Writes the job document as serde_json's pretty printer does, and a newline: everything but
/// the ranks through serde, the ranks written in place of the empty list serde wrote for them
/// (the one top-level `"ranks": []`: a newline inside a string would be escaped, so the
/// marker cannot occur elsewhere).
fn write_json(out: &JobOut<'_>, w: &mut impl std::io::Write) -> std::io::Result<()> {
    out.ranks.elide.set(true);
    let head = serde_json::to_string_pretty(out);
    out.ranks.elide.set(false);
    let head = head.map_err(std::io::Error::other)?;
    const MARK: &str = "\n  \"ranks\": []";
    let (before, after) = head
        .split_once(MARK)
        .ok_or_else(|| std::io::Error::other("internal: no ranks in the job document"))?;
    w.write_all(before.as_bytes())?;
    if out.ranks.len() == 0 {
        w.write_all(MARK.as_bytes())?;
    } else {
        w.write_all(b"\n  \"ranks\": [")?;
        for (i, r) in out.ranks.iter().enumerate() {
            write_rank(w, &r, i == 0)?;
        }
        w.write_all(b"\n  ]")?;
    }
    w.write_all(after.as_bytes())?;
    writeln!(w)
}

/// One rank as serde_json's pretty printer writes it, inside the document's `ranks` list.
fn write_rank(w: &mut impl std::io::Write, r: &RankOut<'_>, first: bool) -> std::io::Result<()> {
    w.write_all(if first { b"\n    {" } else { b",\n    {" })?;
    write!(w, "\n      \"rank\": {},\n      \"host\": ", r.rank)?;
    match r.host {
        Some(h) => json_str(w, h)?,
        None => w.write_all(b"null")?,
    }
    w.write_all(match r.local {
        Some(true) => b",\n      \"local\": true,\n      \"executable\": ".as_slice(),
        Some(false) => b",\n      \"local\": false,\n      \"executable\": ",
        None => b",\n      \"local\": null,\n      \"executable\": ",
    })?;
    match r.executable {
        Some(e) => json_str(w, e)?,
        None => w.write_all(b"null")?,
    }
    write!(w, ",\n      \"pid\": {},\n      \"control\": ", r.pid)?;
    json_str(w, &r.control)?;
    w.write_all(b"\n    }")
}

fn layout_name(source: &LayoutSource) -> &'static str {
    match source {
        LayoutSource::DebugInfo { .. } => "debug_info",
        LayoutSource::Given => "given",
        _ => "abi",
    }
}

fn table_out<'a>(
    table: &'a ProcTable,
    local: impl Fn(u64) -> Option<bool>,
    control: impl Fn(u64) -> Cow<'a, str>,
) -> Vec<RankOut<'a>> {
    table
        .resolved
        .ranks()
        .map(|r| RankOut {
            rank: r.rank,
            host: r.host,
            local: local(r.rank),
            executable: r.executable,
            pid: r.pid,
            control: control(r.rank),
        })
        .collect()
}

/// How rank `rank` of `job` was handled, in the documents' words.
pub(crate) fn control_text(job: &Job, rank: u64) -> Cow<'static, str> {
    match job.control(rank) {
        RankControl::Attached { .. } => "attached".into(),
        RankControl::Remote => "remote".into(),
        RankControl::Refused { reason } => format!("refused: {reason}").into(),
        RankControl::Failed { reason } => format!("failed: {reason}").into(),
        _ => "not_attached".into(),
    }
}

pub(crate) fn job_out<'a>(job: &'a Job, interface: &'static str) -> JobOut<'a> {
    JobOut {
        schema: JOB_SCHEMA,
        starter: StarterOut {
            pid: Some(job.starter.pid),
            image: job.starter.image.as_deref(),
            launcher: job.starter.launcher.map(|l| l.to_string()),
            debug_state: debug_state_out(job.starter.debug_state),
        },
        interface,
        interfaces: vec![interface],
        flags: Some(job.starter.flags),
        layout: layout_name(&job.table.layout.source),
        nodes: Some(
            job.nodes()
                .into_iter()
                .map(|n| NodeOut {
                    host: n.host,
                    local: local_of(&n.locality),
                    ranks: n.ranks,
                })
                .collect(),
        ),
        this_node: Some(ThisNodeOut {
            names: job.this_node.names(),
            addresses: job
                .this_node
                .addresses()
                .iter()
                .map(ToString::to_string)
                .collect(),
            aliases: job.this_node.aliases(),
        }),
        ranks: Ranks::of_job(job),
        problems: job
            .table
            .resolved
            .problems
            .iter()
            .map(ToString::to_string)
            .collect(),
        notes: job.notes.clone(),
    }
}

pub(crate) fn print(out: &JobOut<'_>, json: bool) -> Result<(), String> {
    use std::io::Write;
    if json {
        crate::write_out(|w| write_json(out, w));
        return Ok(());
    }
    let starter = match (out.starter.pid, &out.starter.launcher) {
        (Some(p), Some(l)) => format!("starter pid {p} ({l})"),
        (Some(p), None) => format!("starter pid {p}"),
        _ => "starter (from a core file)".into(),
    };
    crate::write_out(|w| {
        writeln!(
            w,
            "{starter}, {} ranks, interface {}, layout from {}",
            out.ranks.len(),
            out.interface,
            out.layout
        )?;
        writeln!(
            w,
            "{:>6}  {:<16}  {:>8}  {:<13}  executable",
            "rank", "host", "pid", "control"
        )?;
        for r in out.ranks.iter() {
            writeln!(
                w,
                "{:>6}  {:<16}  {:>8}  {:<13}  {}",
                r.rank,
                r.host.unwrap_or("?"),
                r.pid,
                r.control,
                r.executable.unwrap_or("?")
            )?;
        }
        for p in &out.problems {
            writeln!(w, "problem: {p}")?;
        }
        for n in &out.notes {
            writeln!(w, "note: {n}")?;
        }
        Ok(())
    });
    Ok(())
}

pub(crate) fn launch(
    common: &Common,
    hold: bool,
    ranks: Option<mpir_types::ranks::RankSet>,
    timeout: u64,
    starter: &[String],
) -> Result<ExitCode, String> {
    let (program, args) = starter.split_first().ok_or("no starter command given")?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    if common.json {
        // The job's stdout goes to our stderr: stdout carries the JSON only.
        let err = std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| e.to_string())?;
        cmd.stdout(Stdio::from(err));
    }
    let mut options = acquire_options(common)
        .timeout(Duration::from_secs(timeout))
        .hold(hold);
    if let Some(r) = ranks {
        options = options.ranks(RankSelection::Only(r));
    }
    let mut acquired = live::launch(cmd, options).map_err(|e| chain(&e))?;
    let mut child = acquired.take_child().ok_or("no starter process")?;
    if hold {
        let stopped = acquired.hand_over().map_err(|e| chain(&e))?;
        let mut out = job_out(acquired.job(), "mpir");
        out.notes.push(format!(
            "{} ranks left stopped for another tool (SIGCONT lets them run)",
            stopped.len()
        ));
        print(&out, common.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    print(&job_out(acquired.job(), "mpir"), common.json)?;
    drop(acquired);
    let status = child.wait().map_err(|e| e.to_string())?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}

pub(crate) fn attach(common: &Common, timeout: u64, pid: u32) -> Result<ExitCode, String> {
    let options = acquire_options(common).timeout(Duration::from_secs(timeout));
    let any = live::attach_any(pid, options).map_err(|e| chain(&e))?;
    match (&any.mpir, &any.mpi2dd) {
        (Some(a), _) => {
            let mut out = job_out(a.job(), "mpir");
            if any.interface == Interface::Both {
                out.interfaces.push("mpi2dd");
            }
            out.notes.extend(
                any.mismatches
                    .iter()
                    .map(|m| format!("MPIR vs MPI2DD: {m}")),
            );
            print(&out, common.json)?;
        }
        (None, Some(t)) => {
            let node = acquire_options(common)
                .this_node(mpir_target::live::node::this_node())
                .node_facts();
            let ranks: Vec<RankOut<'_>> = t
                .job
                .ranks()
                .map(|(w, r)| RankOut {
                    rank: r.rank as u64,
                    host: Some(&*r.process.host),
                    local: local_of(&node.classify(Some(&r.process.host))),
                    executable: r.executable.as_deref(),
                    pid: i64::from(r.process.pid),
                    control: format!("world {}", w.id).into(),
                })
                .collect();
            // The flags of the process named (else of the metadirectory), in MPIR's shape.
            let record = |p: i64| {
                t.job
                    .processes
                    .iter()
                    .find(|r| i64::from(r.process.pid) == p)
            };
            let flags = record(i64::from(pid))
                .or_else(|| {
                    t.job
                        .metadirectory
                        .as_ref()
                        .and_then(|m| record(i64::from(m.pid)))
                })
                .map(|r| mpir_acquire::interface::flags_of_mpi2dd(r.mpi_flags));
            let out = JobOut {
                schema: JOB_SCHEMA,
                starter: StarterOut {
                    pid: t.job.metadirectory.as_ref().map(|m| m.pid as u32),
                    image: None,
                    launcher: None,
                    debug_state: None,
                },
                interface: "mpi2dd",
                interfaces: vec!["mpi2dd"],
                flags,
                layout: "abi",
                nodes: None,
                this_node: None,
                ranks: ranks.into(),
                problems: t.job.problems.iter().map(|p| format!("{p:?}")).collect(),
                notes: t
                    .job
                    .unreachable
                    .iter()
                    .map(|u| format!("unreachable: {u:?}"))
                    .collect(),
            };
            print(&out, common.json)?;
        }
        _ => return Err("nothing acquired".into()),
    }
    Ok(ExitCode::SUCCESS)
}

/// The job document of a starter's process table read from a core file, with the flags the
/// starter's core defines. Its ranks' hosts say nothing about this machine (`local` null).
pub(crate) fn core_job(table: &ProcTable, flags: MpirFlags) -> JobOut<'_> {
    JobOut {
        schema: JOB_SCHEMA,
        starter: StarterOut {
            pid: None,
            image: None,
            launcher: None,
            debug_state: None,
        },
        interface: "mpir",
        interfaces: vec!["mpir"],
        flags: Some(flags),
        layout: layout_name(&table.layout.source),
        nodes: None,
        this_node: None,
        ranks: table_out(table, |_| None, |_| Cow::Borrowed("core")).into(),
        problems: table
            .resolved
            .problems
            .iter()
            .map(ToString::to_string)
            .collect(),
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpir_target::mock::{MockRank, MockStarter, MockTarget};
    use mpir_target::proctable::{ReadOptions, read_proctable};
    use mpir_types::DataModel;

    #[test]
    fn the_hand_written_ranks_are_serdes_bytes() {
        // Names that need escaping, that cannot be read (null), and plain ones.
        let mut s = MockStarter::new(vec![
            MockRank::new("node\"7\\", "/bin/a\tb", 10),
            MockRank::new("n\u{1}", "/ok", 11),
            MockRank::new("plain", "/usr/bin/app \u{e9}", 12),
        ]);
        s.share_strings = false;
        let mut b = MockTarget::builder(DataModel::LP64);
        s.place(&mut b);
        let t = b.build();
        let table = read_proctable(&t, &ReadOptions::default()).unwrap();
        for empty in [false, true] {
            let mut out = core_job(&table, MpirFlags::default());
            if empty {
                out.ranks = Vec::new().into();
            }
            let mut ours = Vec::new();
            write_json(&out, &mut ours).unwrap();
            let serde = serde_json::to_string_pretty(&out).unwrap() + "\n";
            assert_eq!(String::from_utf8(ours).unwrap(), serde);
        }
    }
}
