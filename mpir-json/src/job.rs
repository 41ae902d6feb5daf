//! The job document (`mpir.job/1`) and its table, from the tool's own types.

use std::borrow::Cow;

use mpir_acquire::{Job, RankControl};
use mpir_target::proctable::ProcTable;
use mpir_types::LayoutSource;
use mpir_types::mpir::{DebugState, Flag, MpirFlags};
use mpir_types::node::Locality;
use serde::Serialize;

/// `schema` of a job document (docs/cli-json.md).
pub const JOB_SCHEMA: &str = "mpir.job/1";

/// One MPIR flag symbol: whether the starter defines it, and its value as a C `int`.
#[derive(Serialize, Clone, Copy)]
pub struct FlagOut {
    pub present: bool,
    pub value: Option<i64>,
}

/// The MPIR flags, each by its spec name without the `MPIR_` prefix.
#[derive(Serialize, Clone, Copy)]
pub struct FlagsOut {
    pub i_am_starter: FlagOut,
    pub acquired_pre_main: FlagOut,
    pub force_to_main: FlagOut,
    pub partial_attach_ok: FlagOut,
    pub ignore_queues: FlagOut,
}

impl From<&MpirFlags> for FlagsOut {
    fn from(f: &MpirFlags) -> Self {
        let one = |f: &Flag| FlagOut {
            present: f.present,
            value: f.value,
        };
        FlagsOut {
            i_am_starter: one(&f.i_am_starter),
            acquired_pre_main: one(&f.acquired_pre_main),
            force_to_main: one(&f.force_to_main),
            partial_attach_ok: one(&f.partial_attach_ok),
            ignore_queues: one(&f.ignore_queues),
        }
    }
}

/// How rank `rank` of `job` was handled, in the documents' words.
pub fn control_text(job: &Job, rank: u64) -> Cow<'static, str> {
    match job.control(rank) {
        RankControl::Attached { .. } => "attached".into(),
        RankControl::Remote => "remote".into(),
        RankControl::Refused { reason } => format!("refused: {reason}").into(),
        RankControl::Failed { error } => format!("failed: {}", mpir_session::chain(error)).into(),
        _ => "not_attached".into(),
    }
}

#[derive(Serialize, Clone)]
pub struct RankOut<'a> {
    pub rank: u64,
    pub host: Option<&'a str>,
    /// Whether `host` is this node: `null` when unknown (no usable host name, a core file).
    pub local: Option<bool>,
    pub executable: Option<&'a str>,
    pub pid: i64,
    /// "attached", "not_attached", "remote", "refused: …", or "failed: …".
    pub control: Cow<'a, str>,
    /// When the table's pid runs a container runtime and the rank was found inside it:
    /// `pid` is then the rank's own process, and this says where it was found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<ContainerOut>,
}

/// Where a rank inside a container was found (`mpir_acquire::Contained`).
#[derive(Serialize, Clone, PartialEq, Eq, Debug)]
pub struct ContainerOut {
    /// The pid the table names: the container runtime's process, or the rank's pid in the
    /// starter's PID namespace.
    pub table_pid: u32,
    /// The runtime's executable; `None` when the table's pid is the rank's own in the
    /// starter's namespace.
    pub runtime: Option<String>,
    /// The rank's program, by its path inside the container.
    pub executable: String,
    /// The rank's pid inside its own PID namespace, when in another.
    pub ns_pid: Option<u32>,
}

impl From<&mpir_acquire::Contained> for ContainerOut {
    fn from(c: &mpir_acquire::Contained) -> Self {
        ContainerOut {
            table_pid: c.table_pid,
            runtime: c.runtime.as_ref().map(|r| r.display().to_string()),
            executable: c.executable.display().to_string(),
            ns_pid: c.ns_pid,
        }
    }
}

/// One node of the job: a distinct host string as reported.
#[derive(Serialize)]
pub struct NodeOut<'a> {
    pub host: Option<&'a str>,
    pub local: Option<bool>,
    pub ranks: usize,
}

/// The facts that decided which hosts are this node.
#[derive(Serialize)]
pub struct ThisNodeOut<'a> {
    pub names: &'a [String],
    pub addresses: Vec<String>,
    pub aliases: &'a [String],
}

/// `MPIR_debug_state` as read: the raw value and its name in the spec (`"unknown"` for a
/// value the spec does not define).
#[derive(Serialize)]
pub struct DebugStateOut {
    pub raw: i64,
    pub name: &'static str,
}

#[derive(Serialize)]
pub struct StarterOut<'a> {
    pub pid: Option<u32>,
    pub image: Option<&'a str>,
    pub launcher: Option<String>,
    pub debug_state: Option<DebugStateOut>,
    /// The launcher's job id (Slurm's `srun`: `totalview_jobid`); absent when not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<u64>,
    /// The launcher's step id (`totalview_stepid`); absent when not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_id: Option<u64>,
}

pub fn local_of(l: &Locality) -> Option<bool> {
    match l {
        Locality::Local(_) => Some(true),
        Locality::Remote => Some(false),
        _ => None,
    }
}

pub fn debug_state_out(raw: Option<i64>) -> Option<DebugStateOut> {
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
pub struct JobOut<'a> {
    /// Schema version of this document.
    pub schema: &'static str,
    pub starter: StarterOut<'a>,
    /// The interface the job was read through: "mpir", "mpi2dd" or "pmix".
    pub interface: &'static str,
    /// Every interface the entry process exports (both when "mpir" and "mpi2dd" agree).
    pub interfaces: Vec<&'static str>,
    pub flags: Option<FlagsOut>,
    pub layout: &'static str,
    /// The job's nodes (distinct hosts), in order of first appearance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<NodeOut<'a>>>,
    /// What said which hosts are this node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub this_node: Option<ThisNodeOut<'a>>,
    pub ranks: Ranks<'a>,
    pub problems: Vec<String>,
    pub notes: Vec<String>,
    /// (MPIR, live) A starter without MPIR symbols: where its table was found by a validated
    /// search of its memory. Absent when the symbols named the table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discovered: Option<DiscoveredOut>,
    /// (PMIx, live) A job read through the PMIx tool interface (Open MPI 5's `prterun`): its
    /// namespace, server and the libpmix that spoke to it. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pmix: Option<PmixOut<'a>>,
}

/// How a job was reached through PMIx (`mpir_acquire::pmix::PmixJob`).
#[derive(Serialize)]
pub struct PmixOut<'a> {
    /// The job's namespace.
    pub nspace: &'a str,
    /// The server's URI, when its rendezvous file gave it.
    pub server_uri: Option<&'a str>,
    /// The rendezvous file the server was found by.
    pub rendezvous: Option<String>,
    /// The libpmix loaded.
    pub library: String,
    /// Its `PMIx_Get_version`.
    pub library_version: &'a str,
    /// Launch mode: whether the launcher still holds the ranks in `PMIx_Init`.
    pub stopped_in_init: bool,
}

impl<'a> From<&'a mpir_acquire::pmix::PmixJob> for PmixOut<'a> {
    fn from(p: &'a mpir_acquire::pmix::PmixJob) -> Self {
        PmixOut {
            nspace: &p.nspace,
            server_uri: p.server_uri.as_deref(),
            rendezvous: p.rendezvous.as_ref().map(|f| f.display().to_string()),
            library: p.library.display().to_string(),
            library_version: &p.library_version,
            stopped_in_init: p.stopped_in_init,
        }
    }
}

/// The evidence of a table found without symbols (`mpir_types::mpir::discover::Discovered`).
#[derive(Serialize)]
pub struct DiscoveredOut {
    /// The word that points at the table (the would-be `MPIR_proctable`), as a hex string.
    pub table_pointer: String,
    /// The table's address.
    pub table: String,
    /// The int that holds the entry count (the would-be `MPIR_proctable_size`).
    pub size_word: String,
    /// Where the size word lies from the pointer, in bytes (negative: before it).
    pub size_offset: i64,
    /// The entry count.
    pub entries: u64,
    /// The facts every entry matched, in words.
    pub facts: &'static str,
}

impl From<&mpir_types::mpir::discover::Discovered> for DiscoveredOut {
    fn from(d: &mpir_types::mpir::discover::Discovered) -> Self {
        DiscoveredOut {
            table_pointer: format!("{:#x}", d.pointer_address),
            table: format!("{:#x}", d.table_address),
            size_word: format!("{:#x}", d.size_address),
            size_offset: d.size_offset(),
            entries: d.entries,
            facts: mpir_types::mpir::discover::Discovered::FACTS,
        }
    }
}

/// The ranks of a job document. Serialized by serde like any list, except while the tool's `print()`
/// writes the document: then serde writes an empty list and `print` writes the ranks itself
/// in place of it, with the same bytes (a million ranks through serde's per-field path cost
/// twice the least a tool must do).
pub struct Ranks<'a> {
    pub source: RanksSource<'a>,
    pub elide: std::cell::Cell<bool>,
}

/// Where the ranks come from: a list (MPI2DD, cores), or an acquired job's table, turned into
/// [`RankOut`]s one at a time as they are written (a million-rank table is never copied).
pub enum RanksSource<'a> {
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
    pub fn of_job(job: &'a Job) -> Self {
        Ranks {
            source: RanksSource::Job(job),
            elide: std::cell::Cell::new(false),
        }
    }

    pub fn len(&self) -> usize {
        match &self.source {
            RanksSource::List(l) => l.len(),
            RanksSource::Job(j) => j.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn iter(&self) -> Box<dyn Iterator<Item = RankOut<'a>> + '_> {
        match &self.source {
            RanksSource::List(l) => Box::new(l.iter().cloned()),
            RanksSource::Job(job) => Box::new(job.ranks().map(|r| {
                let container = job.containers.get(&r.rank);
                RankOut {
                    rank: r.rank,
                    host: r.host,
                    local: local_of(&job.locality(r.rank)),
                    executable: r.executable,
                    pid: container.map_or(r.pid, |c| i64::from(c.pid)),
                    control: control_text(job, r.rank),
                    container: container.map(ContainerOut::from),
                }
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
pub fn json_str(w: &mut impl std::io::Write, value: &str) -> std::io::Result<()> {
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
pub fn write_json(out: &JobOut<'_>, w: &mut impl std::io::Write) -> std::io::Result<()> {
    out.ranks.elide.set(true);
    let head = serde_json::to_string_pretty(out);
    out.ranks.elide.set(false);
    let head = head.map_err(std::io::Error::other)?;
    const MARK: &str = "\n  \"ranks\": []";
    let (before, after) = head
        .split_once(MARK)
        .ok_or_else(|| std::io::Error::other("internal: no ranks in the job document"))?;
    w.write_all(before.as_bytes())?;
    if out.ranks.is_empty() {
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
pub fn write_rank(
    w: &mut impl std::io::Write,
    r: &RankOut<'_>,
    first: bool,
) -> std::io::Result<()> {
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
    if let Some(c) = &r.container {
        write!(
            w,
            ",\n      \"container\": {{\n        \"table_pid\": {},\n        \"runtime\": ",
            c.table_pid
        )?;
        match &c.runtime {
            Some(r) => json_str(w, r)?,
            None => w.write_all(b"null")?,
        }
        w.write_all(b",\n        \"executable\": ")?;
        json_str(w, &c.executable)?;
        match c.ns_pid {
            Some(n) => write!(w, ",\n        \"ns_pid\": {n}\n      }}")?,
            None => w.write_all(b",\n        \"ns_pid\": null\n      }")?,
        }
    }
    w.write_all(b"\n    }")
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
            container: None,
        })
        .collect()
}

/// The job document of `job`, read through `interface` (a job read through PMIx says `pmix`
/// whatever the caller passes).
pub fn job_out<'a>(job: &'a Job, interface: &'static str) -> JobOut<'a> {
    let interface = if job.pmix.is_some() {
        "pmix"
    } else {
        interface
    };
    JobOut {
        schema: JOB_SCHEMA,
        starter: StarterOut {
            pid: Some(job.starter.pid),
            image: job.starter.image.as_deref(),
            launcher: job.starter.launcher.map(|l| l.to_string()),
            debug_state: debug_state_out(job.starter.debug_state),
            job_id: job.starter.job_id,
            step_id: job.starter.step_id,
        },
        interface,
        interfaces: vec![interface],
        flags: Some(FlagsOut::from(&job.starter.flags)),
        layout: if job.pmix.is_some() {
            "pmix"
        } else {
            layout_name(&job.table.layout.source)
        },
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
        problems: problems_of(&job.table),
        notes: job.notes.iter().map(ToString::to_string).collect(),
        discovered: job.discovered.as_ref().map(DiscoveredOut::from),
        pmix: job.pmix.as_ref().map(PmixOut::from),
    }
}

/// What reading the process table found wrong, one line each.
fn problems_of(table: &ProcTable) -> Vec<String> {
    table
        .resolved
        .problems
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// The job document of a starter's process table read from a core file, with the flags the
/// starter's core defines. Its ranks' hosts say nothing about this machine (`local` null).
pub fn core_job(table: &ProcTable, flags: MpirFlags) -> JobOut<'_> {
    JobOut {
        schema: JOB_SCHEMA,
        starter: StarterOut {
            pid: None,
            image: None,
            launcher: None,
            debug_state: None,
            job_id: None,
            step_id: None,
        },
        interface: "mpir",
        interfaces: vec!["mpir"],
        flags: Some(FlagsOut::from(&flags)),
        layout: layout_name(&table.layout.source),
        nodes: None,
        this_node: None,
        ranks: table_out(table, |_| None, |_| Cow::Borrowed("core")).into(),
        problems: problems_of(table),
        notes: Vec::new(),
        discovered: None,
        pmix: None,
    }
}

/// The job document of a job read through MPI2DD only: `t` the traversal from the process
/// `pid`, `node` the facts that say which hosts are this node.
pub fn mpi2dd_job_out<'a>(
    m: &'a mpir_session::Mpi2ddJob,
    pid: u32,
    node: &mpir_types::node::ThisNode,
) -> JobOut<'a> {
    let t = &m.traversal;
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
            container: None,
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
        .map(|r| FlagsOut::from(&mpir_acquire::interface::flags_of_mpi2dd(r.mpi_flags)));
    JobOut {
        schema: JOB_SCHEMA,
        starter: StarterOut {
            pid: t.job.metadirectory.as_ref().map(|m| m.pid as u32),
            image: None,
            launcher: None,
            debug_state: None,
            job_id: None,
            step_id: None,
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
        discovered: None,
        pmix: None,
    }
}

pub fn layout_name(source: &LayoutSource) -> &'static str {
    match source {
        LayoutSource::DebugInfo { .. } => "debug_info",
        LayoutSource::Given => "given",
        _ => "abi",
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
