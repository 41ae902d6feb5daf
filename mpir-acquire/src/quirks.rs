//! What real launchers do that the spec does not say: a catalogue used to explain results and to
//! adapt the protocol, never to fake a result. Facts measured on stock Debian 12 packages (Open MPI
//! 4.1.4, MPICH 4.0.2, Slurm 22.05's `srun`; see "Behaviour beyond the specs" in the repository's
//! [spec list]).
//!
//! [spec list]: https://github.com/mpir-rs/mpir-rs/blob/main/docs/spec/README.md

use std::fmt;

/// A launcher this crate knows quirks of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum Launcher {
    /// Open MPI's `orterun`/`mpirun` (ORTE, 4.x).
    OpenMpi,
    /// MPICH's `mpiexec.hydra`.
    Hydra,
    /// Slurm's `srun` (22.05).
    Slurm,
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Launcher::OpenMpi => "Open MPI (orterun)",
            Launcher::Hydra => "MPICH hydra (mpiexec.hydra)",
            Launcher::Slurm => "Slurm (srun)",
        })
    }
}

/// How the protocol adapts to a launcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Quirks {
    /// The launcher.
    pub launcher: Launcher,
    /// It calls `MPIR_Breakpoint` at spawn only if `MPIR_being_debugged` was set *before* the
    /// job was spawned (so an attach to a running starter whose table is empty waits in vain).
    pub needs_being_debugged_before_spawn: bool,
    /// It calls `MPIR_Breakpoint` at every launch, whether a debugger is there or not.
    pub always_breaks: bool,
    /// Ranks wait for the starter to continue after the event (the starter must run).
    pub ranks_wait_for_starter: bool,
    /// `MPIR_Breakpoint` is not a no-op: its body wakes the ranks, which the launcher stopped
    /// (`SIGSTOP`) at their exec. The ranks are taken while the starter sits at the
    /// breakpoint's entry, and the starter runs the body when it is let go (it is never made
    /// to return early, which would leave the ranks stopped for ever).
    pub breakpoint_wakes_ranks: bool,
    /// What to tell a user, one fact each.
    pub facts: &'static [QuirkFact],
}

/// One catalogued fact about a launcher, told to the user as a
/// [`Note::Quirk`](crate::Note::Quirk); [`Display`](fmt::Display) gives the sentence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum QuirkFact {
    /// Open MPI: the MPIR symbols live in `libopen-rte.so`, loaded after exec.
    OpenMpiSymbolsInLibrary,
    /// Open MPI: `MPIR_Breakpoint` is called only if `MPIR_being_debugged` was set before the
    /// job was spawned.
    OpenMpiBreaksOnlyIfDebugged,
    /// Open MPI: ranks wait for a PMIx release, not for `MPIR_debug_gate`.
    OpenMpiPmixRelease,
    /// hydra: the presence-only flags are defined with value 0.
    HydraPresenceFlagsZero,
    /// hydra: `MPIR_Breakpoint` is called at every launch.
    HydraAlwaysBreaks,
    /// hydra: the stock binary is stripped; its MPIR symbols come from a separate debug file.
    HydraStripped,
    /// Intel MPI's hydra: with `-tv` it waits after `MPIR_Breakpoint` until
    /// `MPIR_being_debugged` is non-zero, so a release leaves the flag set.
    IntelWaitsForDebugger,
    /// srun: with `MPIR_being_debugged` set, the tasks are stopped at the dynamic loader's entry,
    /// and `MPIR_Breakpoint`'s own body forwards the wake-up signal (`SIG_DEBUG_WAKE`).
    SlurmBreakpointWakesTasks,
    /// srun: `executable_name` is the task's `argv[0]` as typed (`sleep`, `./a.out`).
    SlurmExecutableAsTyped,
    /// srun: the step is named by `totalview_jobid` and `totalview_stepid`.
    SlurmStepIds,
}

/// The function of Intel MPI's `mpiexec.hydra` that waits, after the spawn event, until
/// `MPIR_being_debugged` is non-zero (in `-tv` mode, the one that starts TotalView itself): its
/// presence in the starter is the fact that decides [`QuirkFact::IntelWaitsForDebugger`].
pub const INTEL_WAIT_FOR_DEBUGGER: &str = "HYD_dbg_wait_for_debugger";

impl QuirkFact {
    /// The launcher the fact is about.
    pub fn launcher(self) -> Launcher {
        match self {
            QuirkFact::OpenMpiSymbolsInLibrary
            | QuirkFact::OpenMpiBreaksOnlyIfDebugged
            | QuirkFact::OpenMpiPmixRelease => Launcher::OpenMpi,
            QuirkFact::HydraPresenceFlagsZero
            | QuirkFact::HydraAlwaysBreaks
            | QuirkFact::HydraStripped
            | QuirkFact::IntelWaitsForDebugger => Launcher::Hydra,
            QuirkFact::SlurmBreakpointWakesTasks
            | QuirkFact::SlurmExecutableAsTyped
            | QuirkFact::SlurmStepIds => Launcher::Slurm,
        }
    }
}

impl fmt::Display for QuirkFact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuirkFact::OpenMpiSymbolsInLibrary => {
                "Open MPI: the MPIR symbols live in libopen-rte.so (.dynsym), loaded after exec; \
                 MPIR_being_debugged is set at the program's entry point, once the library is \
                 mapped"
            }
            QuirkFact::OpenMpiBreaksOnlyIfDebugged => {
                "Open MPI: MPIR_Breakpoint is called only if MPIR_being_debugged was set before \
                 the job was spawned"
            }
            QuirkFact::OpenMpiPmixRelease => {
                "Open MPI: ranks wait for a PMIx release that orterun sends once MPIR_Breakpoint \
                 returns; MPIR_debug_gate exists in the ranks but is not used"
            }
            QuirkFact::HydraPresenceFlagsZero => {
                "hydra: presence-only flags (MPIR_i_am_starter, MPIR_partial_attach_ok) are \
                 defined with value 0; the interface tests presence"
            }
            QuirkFact::HydraAlwaysBreaks => {
                "hydra: MPIR_Breakpoint is called through a function pointer at every launch, \
                 debugger or not"
            }
            QuirkFact::HydraStripped => {
                "hydra: the stock binary is stripped; its MPIR symbols come from a separate debug \
                 file"
            }
            QuirkFact::IntelWaitsForDebugger => {
                "Intel MPI hydra: with -tv it waits after MPIR_Breakpoint until \
                 MPIR_being_debugged is non-zero (HYD_dbg_wait_for_debugger); a release leaves \
                 MPIR_being_debugged set so that the job runs on"
            }
            QuirkFact::SlurmBreakpointWakesTasks => {
                "srun: with MPIR_being_debugged set, slurmstepd stops each task (SIGSTOP) at the \
                 dynamic loader's entry, before main; MPIR_Breakpoint is not a no-op: its body \
                 forwards SIG_DEBUG_WAKE, on which slurmstepd continues the tasks. The tasks are \
                 taken while srun sits at the breakpoint's entry; srun runs the body when let go"
            }
            QuirkFact::SlurmExecutableAsTyped => {
                "srun: the table's executable names are the tasks' argv[0] as typed (a bare name \
                 was found through PATH); each local rank's program is proven from /proc"
            }
            QuirkFact::SlurmStepIds => {
                "srun: totalview_jobid and totalview_stepid name the Slurm job and step"
            }
        })
    }
}

const OPEN_MPI: Quirks = Quirks {
    launcher: Launcher::OpenMpi,
    needs_being_debugged_before_spawn: true,
    always_breaks: false,
    ranks_wait_for_starter: true,
    breakpoint_wakes_ranks: false,
    facts: &[
        QuirkFact::OpenMpiSymbolsInLibrary,
        QuirkFact::OpenMpiBreaksOnlyIfDebugged,
        QuirkFact::OpenMpiPmixRelease,
    ],
};

const HYDRA: Quirks = Quirks {
    launcher: Launcher::Hydra,
    needs_being_debugged_before_spawn: false,
    always_breaks: true,
    ranks_wait_for_starter: true,
    breakpoint_wakes_ranks: false,
    facts: &[
        QuirkFact::HydraPresenceFlagsZero,
        QuirkFact::HydraAlwaysBreaks,
        QuirkFact::HydraStripped,
    ],
};

const SLURM: Quirks = Quirks {
    launcher: Launcher::Slurm,
    // srun fills its table at every launch but breaks only while being debugged.
    needs_being_debugged_before_spawn: true,
    always_breaks: false,
    ranks_wait_for_starter: true,
    breakpoint_wakes_ranks: true,
    facts: &[
        QuirkFact::SlurmBreakpointWakesTasks,
        QuirkFact::SlurmExecutableAsTyped,
        QuirkFact::SlurmStepIds,
    ],
};

impl Quirks {
    /// The quirks of `launcher`.
    pub fn of(launcher: Launcher) -> &'static Quirks {
        match launcher {
            Launcher::OpenMpi => &OPEN_MPI,
            Launcher::Hydra => &HYDRA,
            Launcher::Slurm => &SLURM,
        }
    }
}

/// Which launcher defines `MPIR_Breakpoint` in `image` (the file that defines it) of a
/// process running `executable`, if a known one.
pub fn identify(executable: Option<&str>, image: Option<&str>) -> Option<Launcher> {
    let file = |p: Option<&str>| {
        p.and_then(|p| p.rsplit('/').next())
            .unwrap_or_default()
            .to_string()
    };
    let (exe, image) = (file(executable), file(image));
    if image.starts_with("libopen-rte") || exe == "orterun" {
        Some(Launcher::OpenMpi)
    } else if exe.contains("hydra") || image.contains("hydra") {
        Some(Launcher::Hydra)
    } else if exe == "srun" || image == "srun" {
        Some(Launcher::Slurm)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launchers_are_told_apart_by_the_defining_image() {
        let ompi = identify(
            Some("/usr/bin/orterun"),
            Some("/usr/lib/x86_64-linux-gnu/libopen-rte.so.40.30.2"),
        );
        assert_eq!(ompi, Some(Launcher::OpenMpi));
        assert_eq!(
            identify(
                Some("/usr/bin/mpiexec.hydra"),
                Some("/usr/bin/mpiexec.hydra")
            ),
            Some(Launcher::Hydra)
        );
        assert_eq!(
            identify(Some("/opt/x/starter"), Some("/opt/x/starter")),
            None
        );
        assert_eq!(
            identify(Some("/usr/bin/srun"), Some("/usr/bin/srun")),
            Some(Launcher::Slurm)
        );
        // A program merely named like it elsewhere in its path is not srun.
        assert_eq!(identify(Some("/opt/srun/bin/x"), None), None);
        assert_eq!(identify(None, None), None);
        assert!(Quirks::of(Launcher::OpenMpi).needs_being_debugged_before_spawn);
        assert!(Quirks::of(Launcher::Hydra).always_breaks);
        assert!(Quirks::of(Launcher::Slurm).breakpoint_wakes_ranks);
        assert!(!Quirks::of(Launcher::Hydra).breakpoint_wakes_ranks);
        for l in [Launcher::OpenMpi, Launcher::Hydra, Launcher::Slurm] {
            assert!(Quirks::of(l).facts.iter().all(|f| f.launcher() == l));
        }
    }
}
