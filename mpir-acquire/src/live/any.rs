//! [`attach_any`]: one attach API for any interface (MPIR, MPI2DD, both, or PMIx).

use mpi2dd::connect::LocalConnector;
use mpi2dd::traverse::TraverseOptions;

use super::{Acquired, attach_opened, discover, exists, open_for, pmix, slurm};
use crate::error::AcquireError;
use crate::interface::{Interface, InterfaceChoice};
use crate::job::Job;
use crate::options::AcquireOptions;

/// A job acquired through whichever interface its entry process exports.
#[derive(Debug)]
#[non_exhaustive]
pub struct AnyJob {
    /// What the entry process exports.
    pub interface: Interface,
    /// The acquisition of the starter's job: through MPIR (MPIR or both), or through PMIx
    /// (the same job model: [`Job::pmix`] says so).
    pub mpir: Option<Acquired>,
    /// The MPI2DD traversal (MPI2DD or both): every world, directory and spawn.
    pub mpi2dd: Option<mpi2dd::traverse::Traversal>,
    /// With both: where the two disagree about the starter's world (rank by rank), empty when
    /// they agree.
    pub mismatches: Vec<String>,
}

/// Attach mode through any interface: MPIR if the process is a starter, MPI2DD if it exports
/// `MPI2DD_info` (from any rank, directory or metadirectory), both when it exports both — then
/// the MPIR table is compared with the MPI2DD world(s) that no spawn created, while the
/// starter is held. A launcher with no MPIR symbol that a valid PMIx tool rendezvous file
/// names (Open MPI 5's `prterun`) is acquired through PMIx. [`AcquireOptions::interface`]
/// forces one.
pub fn attach_any(pid: u32, options: AcquireOptions) -> Result<AnyJob, AcquireError> {
    exists(pid)?;
    slurm::refuse_shepherd(pid)?;
    let probe = open_for(pid, &options)?;
    let detected = match options.interface {
        InterfaceChoice::Pmix => Some(Interface::Pmix),
        InterfaceChoice::Auto => crate::interface::detect(&probe)?,
        // Forced: only what the process exports of it.
        choice => {
            let mpir = choice == InterfaceChoice::Mpir;
            match crate::interface::detect(&probe)? {
                Some(Interface::Both) if mpir => Some(Interface::Mpir),
                Some(Interface::Both) => Some(Interface::Mpi2dd),
                Some(Interface::Mpir) if !mpir => None,
                Some(Interface::Mpi2dd) if mpir => None,
                other => other,
            }
        }
    };
    let no_mpir = || discover::has_no_mpir_symbols(&probe);
    let interface = match detected {
        Some(i) => i,
        None if options.interface == InterfaceChoice::Auto
            && no_mpir()?
            && pmix::is_pmix_server(pid) =>
        {
            Interface::Pmix
        }
        // No MPIR symbols at all, and a job: MPIR through a discovered table.
        None if options.interface != InterfaceChoice::Mpi2dd
            && discover::searchable(pid, &probe)? =>
        {
            Interface::Mpir
        }
        None => {
            return Err(AcquireError::NotAStarter {
                pid,
                symbol: "MPIR_Breakpoint or MPI2DD_info",
                images: "any image of the process".into(),
            });
        }
    };
    let mut probe = Some(probe);
    let traverse_from = |pid: u32| {
        let connector = LocalConnector::new().with_debug_options(options.debug.clone());
        let host = connector.hostname().clone();
        mpi2dd::traverse::traverse(&connector, &host, pid as i32, &TraverseOptions::default())
            .map_err(|source| AcquireError::Mpi2dd { pid, source })
    };
    match interface {
        Interface::Pmix => Ok(AnyJob {
            interface,
            mpir: Some(pmix::attach(pid, options)?),
            mpi2dd: None,
            mismatches: Vec::new(),
        }),
        Interface::Mpir => Ok(AnyJob {
            interface,
            mpir: Some(attach_opened(pid, options, probe.take())?),
            mpi2dd: None,
            mismatches: Vec::new(),
        }),
        Interface::Mpi2dd => Ok(AnyJob {
            interface,
            mpir: None,
            mpi2dd: Some(traverse_from(pid)?),
            mismatches: Vec::new(),
        }),
        _ => {
            let hold = options.hold;
            let mut acquired = attach_opened(pid, options.clone().with_hold(true), probe.take())?;
            let traversal = traverse_from(pid);
            let mismatches = match &traversal {
                Ok(t) => cross_check(acquired.job(), &t.job),
                Err(_) => Vec::new(),
            };
            if !hold {
                let problems = acquired.release()?;
                acquired.job.notes.extend(problems);
            }
            Ok(AnyJob {
                interface,
                mpir: Some(acquired),
                mpi2dd: Some(traversal?),
                mismatches,
            })
        }
    }
}

/// Where MPIR's table and MPI2DD's root worlds disagree, rank by rank.
fn cross_check(mpir: &Job, mpi2dd: &mpi2dd::job::Job) -> Vec<String> {
    let roots: Vec<&mpi2dd::job::World> = mpi2dd
        .roots
        .iter()
        .filter_map(|id| mpi2dd.world(id))
        .collect();
    let [world] = roots.as_slice() else {
        return vec![format!(
            "MPI2DD has {} worlds that no spawn created; MPIR describes one",
            roots.len()
        )];
    };
    let mut out = Vec::new();
    if world.ranks.len() != mpir.len() {
        out.push(format!(
            "MPIR lists {} ranks, MPI2DD world {} has {}",
            mpir.len(),
            world.id,
            world.ranks.len()
        ));
    }
    for r in mpir.ranks() {
        let other = world
            .ranks
            .iter()
            .find(|w| i64::from(w.rank) == r.rank as i64);
        match other {
            Some(w) if i64::from(w.process.pid) == r.pid => {}
            Some(w) => out.push(format!(
                "rank {}: MPIR pid {}, MPI2DD pid {}",
                r.rank, r.pid, w.process.pid
            )),
            None => out.push(format!("rank {}: not in MPI2DD world {}", r.rank, world.id)),
        }
    }
    out
}
