//! A bundle of `mpir watch`: the full read's documents, the HTML report and, when asked, a
//! core of one representative rank per stack equivalence class, written into a hidden
//! directory renamed into place once complete.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context as _;
use mpir_session::StacksRead;
use mpir_target::corefile::write::CoreOptions;
use mpir_types::ranks::RankSet;
use serde_json::{Value, json};

use super::{Costs, Trigger, WatchOpts, Watched, readable};
use crate::cmd::report;

/// What a full read found, and what a bundle of it holds.
pub(super) struct Outcome {
    pub(super) documents: Vec<Value>,
    pub(super) hang: bool,
    pub(super) verdict: String,
    pub(super) stacks: Option<StacksRead>,
    pub(super) dir: Option<PathBuf>,
}

/// The whole job, read as `mpir report` reads it.
pub(super) fn full(w: &mut Watched<'_>) -> anyhow::Result<Outcome> {
    let stacks = report::stack_options(
        2,
        w.interval,
        false,
        Some(mpir_types::stacks::PythonView::Interleaved),
    );
    let read = report::read_all(w.session, w.samples, w.interval, &stacks, w.types_given)?;
    let verdict = read
        .documents
        .iter()
        .find_map(|d| {
            d.get("schema")
                .and_then(Value::as_str)
                .filter(|s| s.starts_with("mpir.deadlock/"))
                .and(d.get("verdict"))
                .and_then(Value::as_str)
        })
        .unwrap_or("unknown")
        .to_string();
    Ok(Outcome {
        documents: read.documents,
        hang: read.hang,
        verdict,
        stacks: read.stacks,
        dir: None,
    })
}

/// A full read, then its bundle, whatever the verdict (a time limit or a request).
pub(super) fn bundle(
    w: &mut Watched<'_>,
    opts: &WatchOpts,
    trigger: Trigger,
    costs: &mut Costs,
) -> anyhow::Result<Outcome> {
    let outcome = full(w)?;
    costs.full_reads += 1;
    write_bundle(w, opts, trigger, outcome)
}

/// Writes the bundle of `outcome` under `opts.out`: into a hidden directory renamed into place
/// once complete (a full disk or a vanished directory leaves no half bundle, and ends the
/// watch with the reason; the job is left as it is).
pub(super) fn write_bundle(
    w: &mut Watched<'_>,
    opts: &WatchOpts,
    trigger: Trigger,
    mut outcome: Outcome,
) -> anyhow::Result<Outcome> {
    let stamp = mpir_report::compact_utc(SystemTime::now());
    let name = format!("bundle-{stamp}-{}", trigger.slug());
    let tmp = opts.out.join(format!(".{name}.partial"));
    let dir = opts.out.join(&name);
    let result = (|| -> anyhow::Result<Vec<Value>> {
        std::fs::create_dir(&tmp)
            .with_context(|| format!("cannot create the bundle {}", tmp.display()))?;
        let mut files = Vec::new();
        for d in &outcome.documents {
            let kind = d
                .get("schema")
                .and_then(Value::as_str)
                .and_then(|s| s.strip_prefix("mpir."))
                .and_then(|s| s.split('/').next())
                .unwrap_or("document");
            let file = format!("{kind}.json");
            write_file(
                &tmp.join(&file),
                serde_json::to_string_pretty(d)?.as_bytes(),
            )?;
            files.push(json!(file));
        }
        let cores = if opts.cores {
            cores(w, opts, outcome.stacks.as_ref(), &tmp.join("cores"))?
        } else {
            Vec::new()
        };
        let page = report::page(
            outcome.documents.clone(),
            &[format!("written by mpir watch: {}", trigger.describe())],
        )?;
        page.write(&tmp.join("report.html"))?;
        files.push(json!("report.html"));
        let summary = json!({
            "schema": "mpir.watch-bundle/1",
            "trigger": trigger.slug(),
            "why": trigger.describe(),
            "written": mpir_report::rfc3339_utc(SystemTime::now()),
            "verdict": outcome.verdict,
            "files": files,
            "cores": cores,
        });
        write_file(
            &tmp.join("bundle.json"),
            serde_json::to_string_pretty(&summary)?.as_bytes(),
        )?;
        std::fs::rename(&tmp, &dir)
            .with_context(|| format!("cannot move the bundle into place at {}", dir.display()))?;
        Ok(files)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e.context(format!(
            "the bundle ({}) could not be written; the watch ends and the job runs on untouched",
            trigger.describe()
        )));
    }
    eprintln!(
        "mpir: bundle written to {} ({})",
        dir.display(),
        trigger.describe()
    );
    outcome.dir = Some(dir);
    Ok(outcome)
}

fn write_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// A core of one representative rank per stack equivalence class (the lowest rank of each,
/// the largest classes first), each held only while it is written.
fn cores(
    w: &mut Watched<'_>,
    opts: &WatchOpts,
    stacks: Option<&StacksRead>,
    dir: &Path,
) -> anyhow::Result<Vec<Value>> {
    let Some(stacks) = stacks else {
        return Ok(vec![
            json!({"error": "no stacks were read: no class to pick a rank from"}),
        ]);
    };
    std::fs::create_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let local: HashSet<u64> = readable(w.session).into_iter().map(|(r, _)| r).collect();
    // Ranks of this node that cannot be stopped, and why (once, for every class).
    let refused: Vec<(u64, String)> = w
        .session
        .known_ranks()
        .into_iter()
        .enumerate()
        .filter_map(|(i, (r, _, why))| {
            let why = why?.not_read();
            (!why.is_remote()).then(|| (r.unwrap_or(i as u64), why.text))
        })
        .collect();
    // The classes: the rank sets ending at each leaf of the merged tree.
    let mut classes: Vec<RankSet> = Vec::new();
    for (_, node) in stacks.tree().nodes() {
        let ends = node.ends();
        if !ends.is_empty() && !classes.contains(&ends) {
            classes.push(ends);
        }
    }
    classes.sort_by_key(|c| std::cmp::Reverse(c.count_within(u64::MAX)));
    let mut out = Vec::new();
    // Each rank's core entry once written: a rank is in as many classes as its threads end at
    // different leaves, and its one core holds all of them.
    let mut dumped: HashMap<u64, Value> = HashMap::new();
    for class in classes.into_iter().take(opts.max_cores as usize) {
        let rank = match pick(&class, &local, &dumped, &refused) {
            Pick::Dump(rank) => rank,
            Pick::Written(rank) => {
                let mut entry = dumped[&rank].clone();
                entry["class"] = json!(class.to_string());
                out.push(entry);
                continue;
            }
            Pick::None(error) => {
                out.push(json!({"class": class.to_string(), "error": error}));
                continue;
            }
        };
        let path = dir.join(format!("rank-{rank}.core"));
        let limits = CoreOptions::default().with_max_bytes(opts.max_core_mib << 20);
        let entry = match w.session.write_core(rank, &path, &limits) {
            Ok(c) => json!({
                "class": class.to_string(),
                "rank": rank,
                "pid": c.pid,
                "file": format!("cores/rank-{rank}.core"),
                "bytes": c.core.bytes,
                "threads": c.core.threads,
                "stopped_ms": c.stopped_for.as_secs_f64() * 1e3,
            }),
            Err(e) => {
                let why = mpir_session::chain(&e);
                eprintln!("mpir: warning: no core of rank {rank}: {why}");
                json!({"class": class.to_string(), "rank": rank, "error": why})
            }
        };
        dumped.insert(rank, entry.clone());
        out.push(entry);
    }
    Ok(out)
}

/// Which rank's core stands for a class.
#[derive(Debug, PartialEq, Eq)]
enum Pick {
    /// Write this rank's core (the class's lowest rank on this node).
    Dump(u64),
    /// This rank of the class has its core already (written for an earlier class: a rank is
    /// in one class per leaf its threads end at), and that core holds this class's thread too.
    Written(u64),
    /// No core: why.
    None(String),
}

/// The rank whose core stands for `class`: one whose core is written already (`dumped`; no
/// rank is stopped twice for one bundle), else its lowest rank on this node (`local`); else
/// why none can be (a rank of the class that runs here but cannot be stopped, from
/// `refused`, or none of its ranks runs here).
fn pick(
    class: &RankSet,
    local: &HashSet<u64>,
    dumped: &HashMap<u64, Value>,
    refused: &[(u64, String)],
) -> Pick {
    let here = || class.iter_within(u64::MAX).filter(|r| local.contains(r));
    if let Some(rank) = here().find(|r| dumped.contains_key(r)) {
        return Pick::Written(rank);
    }
    if let Some(rank) = here().next() {
        return Pick::Dump(rank);
    }
    match refused.iter().find(|(r, _)| class.contains(*r)) {
        Some((r, why)) => Pick::None(format!(
            "no rank of this class can be stopped here: rank {r}: {why}"
        )),
        None => Pick::None("no rank of this class runs on this node".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ranks: &[u64]) -> RankSet {
        RankSet::from_ranks(ranks.iter().copied())
    }

    #[test]
    fn a_class_picks_its_lowest_rank_of_this_node() {
        let local: HashSet<u64> = [1, 2, 3].into();
        let dumped = HashMap::from([(3, json!({"rank": 3}))]);
        assert_eq!(pick(&set(&[0, 1, 2]), &local, &dumped, &[]), Pick::Dump(1));
    }

    #[test]
    fn a_class_of_ranks_whose_cores_are_written_shares_one() {
        // Rank 0's main thread ends with ranks 1-2, its progress thread alone: two classes,
        // one core.
        let local: HashSet<u64> = [0, 1, 2].into();
        let dumped = HashMap::from([(0, json!({"rank": 0}))]);
        assert_eq!(pick(&set(&[0]), &local, &dumped, &[]), Pick::Written(0));
        // A class of rank 2's helper thread with rank 0's: rank 0's core shows it, no second
        // rank is stopped.
        assert_eq!(pick(&set(&[0, 2]), &local, &dumped, &[]), Pick::Written(0));
    }

    #[test]
    fn a_class_without_a_rank_here_says_why() {
        let local: HashSet<u64> = [0].into();
        let dumped = HashMap::new();
        let refused = vec![(3, "ptrace refused".to_string())];
        assert_eq!(
            pick(&set(&[3, 4]), &local, &dumped, &refused),
            Pick::None("no rank of this class can be stopped here: rank 3: ptrace refused".into())
        );
        assert_eq!(
            pick(&set(&[5]), &local, &dumped, &refused),
            Pick::None("no rank of this class runs on this node".into())
        );
    }
}
