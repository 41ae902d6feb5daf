//! [`QueueReader`]: one rank's queues at a time, from whichever engine fits the job — a native
//! walker when the MPI's types are known, the MPI's own DLL otherwise, or what the caller
//! forces — as the one [`crate::model`].
//!
//! ```no_run
//! use std::rc::Rc;
//! use mpir_mqd::{QueueReader, ReadRank, ReaderOptions};
//! use mpir_target::Target;
//! use mpir_target::live::LiveTarget;
//!
//! let rank0: Rc<dyn Target> = Rc::new(LiveTarget::open(4242, Default::default())?);
//! let mut reader = QueueReader::open(&*rank0, ReaderOptions::default())?;
//! println!("engine: {}", reader.engine());
//! if let Some(why) = reader.fallback_reason() {
//!     println!("(no native walker: {why})");
//! }
//! let queues = reader.read(&ReadRank::new(Some(0), "/path/to/app"), rank0)?;
//! for c in &queues.communicators {
//!     println!("{}: {} receives", c.communicator.name, c.receives.operations().len());
//! }
//! reader.finish();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use mpir_target::Target;

use crate::discover::{DllSource, discover_dll};
use crate::error::native::NativeError;
use crate::error::{MqdError, Result};
use crate::host::{HostOptions, ProcessSpec, QueueHost};
use crate::layouts::{self, Chosen, Expect, LayoutSet, ShippedTypes};
use crate::model::{RankQueues, ReadNote};
use crate::native::{self, ProcessInfo, WalkOptions, Walker, WalkerKind};
use crate::output::OutputLog;
use crate::proof::ReadPath;
use crate::remote::{HelperOptions, open_out_of_process};

/// Which engine reads the queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Engine {
    /// A DLL the caller names ([`ReaderOptions::with_dll`]) if any; else the native walker
    /// when [`native::detect`] recognises the process (it sees more: unexpected messages,
    /// global ranks, groups); else the MPI's DLL, with the native failure kept
    /// ([`QueueReader::fallback_reason`]).
    #[default]
    Auto,
    /// The MPI's message-queue DLL only.
    Dll,
    /// The native walkers only.
    Native,
}

/// Where the DLL runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum DllPlace {
    InProcess,
    OutOfProcess(HelperOptions),
}

/// Where a [`QueueReader`]'s DLL runs.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DllHosting {
    /// In this process ([`crate::Host`]).
    InProcess,
    /// In a helper process ([`crate::OutOfProcessHost`]).
    OutOfProcess,
}

/// How a [`QueueReader`] chooses and drives its engine. The DLL runs out of process unless
/// [`ReaderOptions::with_dll_in_process`] (`unsafe`) says otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReaderOptions {
    engine: Engine,
    dll: Option<PathBuf>,
    place: DllPlace,
    host: HostOptions,
    walk: WalkOptions,
    layouts: Layouts,
}

/// Which layout sets a [`QueueReader`] may prove on a stock Open MPI process that has no debug
/// information ([`crate::layouts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Layouts {
    /// The sets shipped with this build.
    Shipped,
    /// These sets only.
    Given(Vec<Arc<LayoutSet>>),
    /// None: such a process's types must come from debug information or a types sidecar.
    Off,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            engine: Engine::Auto,
            dll: None,
            place: DllPlace::OutOfProcess(HelperOptions::default()),
            host: HostOptions::default(),
            walk: WalkOptions::default(),
            layouts: Layouts::Shipped,
        }
    }
}

impl ReaderOptions {
    /// With engine `engine` (default [`Engine::Auto`]).
    pub fn with_engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }

    /// With the DLL at `path` instead of the one the MPI names (with [`Engine::Auto`] the
    /// DLL is then used).
    pub fn with_dll(mut self, path: impl Into<PathBuf>) -> Self {
        self.dll = Some(path.into());
        self
    }

    /// With the DLL in a helper process started as `helper` says (the default, with
    /// [`HelperOptions::default`]).
    pub fn with_helper(mut self, helper: HelperOptions) -> Self {
        self.place = DllPlace::OutOfProcess(helper);
        self
    }

    /// With the DLL loaded into this process (faster; a DLL that crashes takes the process,
    /// and the ranks it holds, with it).
    ///
    /// # Safety
    /// The contract of [`crate::Host::load`] for the DLL the reader will load: the one the
    /// MPI names, or the one given with [`ReaderOptions::with_dll`].
    #[allow(unsafe_code)] // An `unsafe fn` for its contract; it does nothing unsafe itself.
    pub unsafe fn with_dll_in_process(mut self) -> Self {
        self.place = DllPlace::InProcess;
        self
    }

    /// With other bounds and units for the DLL's results.
    pub fn with_host_options(mut self, host: HostOptions) -> Self {
        self.host = host;
        self
    }

    /// With other bounds for the native walkers.
    pub fn with_walk_options(mut self, walk: WalkOptions) -> Self {
        self.walk = walk;
        self
    }

    /// With `sets` as the only candidate layout sets for a stock Open MPI process (instead of
    /// the shipped ones): for sets of one's own, and for tests of the proof.
    pub fn with_layout_sets(mut self, sets: Vec<LayoutSet>) -> Self {
        self.layouts = Layouts::Given(sets.into_iter().map(Arc::new).collect());
        self
    }

    /// Without the shipped layout sets: a stock Open MPI's types must then come from debug
    /// information or a types sidecar.
    pub fn without_shipped_layouts(mut self) -> Self {
        self.layouts = Layouts::Off;
        self
    }

    /// The engine asked for.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The message-queue DLL given instead of the MPI's own, if any.
    pub fn dll(&self) -> Option<&std::path::Path> {
        self.dll.as_deref()
    }

    /// Whether the layout sets shipped with this build may be proven on a stock Open MPI
    /// process (not after [`without_shipped_layouts`](ReaderOptions::without_shipped_layouts)).
    pub fn uses_shipped_layouts(&self) -> bool {
        self.layouts == Layouts::Shipped
    }
}

/// The engine a [`QueueReader`] uses. Its `Display` is the short name tools show
/// (`native MPICH debug queues`, `dll /path/libtvmpich.so`).
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EngineUsed {
    /// A native walker of this layout.
    Native(WalkerKind),
    /// The MPI's DLL.
    Dll {
        /// Its path.
        path: PathBuf,
        /// Where the path came from.
        source: DllSource,
        /// Where it runs.
        hosting: DllHosting,
    },
}

impl fmt::Display for EngineUsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineUsed::Native(kind) => f.write_str(match kind {
                WalkerKind::MpichCh3 => "native MPICH ch3",
                WalkerKind::MpichDebugq => "native MPICH debug queues",
                WalkerKind::OpenMpiOb1 => "native Open MPI ob1",
            }),
            EngineUsed::Dll { path, .. } => write!(f, "dll {}", path.display()),
        }
    }
}

/// The rank to read: its `MPI_COMM_WORLD` rank when known, and its executable image.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadRank {
    /// Rank in `MPI_COMM_WORLD`, when the job says.
    pub global_rank: Option<u64>,
    /// The executable (named in the DLL's messages).
    pub image: PathBuf,
    /// The job's size, when known (checked by the proof of shipped layouts).
    pub job_size: Option<u64>,
}

impl ReadRank {
    /// A rank of world rank `global_rank` running `image`.
    pub fn new(global_rank: Option<u64>, image: impl Into<PathBuf>) -> Self {
        ReadRank {
            global_rank,
            image: image.into(),
            job_size: None,
        }
    }

    /// The same rank, of a job of `size` processes.
    pub fn with_job_size(mut self, size: u64) -> Self {
        self.job_size = Some(size);
        self
    }
}

enum Inner {
    Native(Walker),
    Dll {
        host: Box<dyn QueueHost>,
        used: EngineUsed,
        /// Where the DLL reads, from the probe's symbols.
        path: ReadPath,
    },
}

/// Reads ranks' queues with one engine, chosen once for the job from a probe process.
pub struct QueueReader {
    inner: Inner,
    fallback: Option<NativeError>,
    /// The shipped layout set proven on the probe, used for every rank proven in turn.
    layouts: Option<Chosen>,
}

impl fmt::Debug for QueueReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueReader")
            .field("engine", &self.engine())
            .field("fallback", &self.fallback)
            .field("layouts", &self.layouts.as_ref().map(|c| c.set.id()))
            .finish_non_exhaustive()
    }
}

impl QueueReader {
    /// Chooses the engine for the job `probe` (one of its ranks) belongs to, as
    /// `options.engine()` says, and opens it (detects the walker, or finds and hosts the DLL).
    ///
    /// With [`Engine::Auto`], when neither fits: [`MqdError::NoEngine`], with both reasons, or
    /// [`MqdError::NotExported`] when the MPI keeps no queue symbol any walker reads and names
    /// no DLL.
    ///
    /// A stock Open MPI process without debug information or types sidecar gets its types from
    /// a shipped layout set proven on `probe` ([`crate::layouts::choose`]), or the open fails
    /// with [`MqdError::Layouts`] saying why none fits.
    pub fn open(probe: &dyn Target, options: ReaderOptions) -> Result<Self> {
        let layouts = choose_layouts(probe, &options)?;
        let wrapped = layouts
            .as_ref()
            .map(|c| ShippedTypes::new(probe, Arc::clone(&c.set)));
        let probe: &dyn Target = match &wrapped {
            Some(w) => w,
            None => probe,
        };
        let mut reader = Self::open_engine(probe, options)?;
        reader.layouts = layouts;
        Ok(reader)
    }

    fn open_engine(probe: &dyn Target, options: ReaderOptions) -> Result<Self> {
        let native = |o: &ReaderOptions| native::detect(probe, &o.walk);
        match options.engine {
            Engine::Dll => Ok(Self::dll(probe, options, None)?),
            Engine::Native => Ok(QueueReader {
                inner: Inner::Native(native(&options)?),
                fallback: None,
                layouts: None,
            }),
            Engine::Auto if options.dll.is_some() => Self::dll(probe, options, None),
            Engine::Auto => match native(&options) {
                Ok(walker) => Ok(QueueReader {
                    inner: Inner::Native(walker),
                    fallback: None,
                    layouts: None,
                }),
                Err(why) => Self::dll(probe, options, Some(why.clone())).map_err(|dll| {
                    match (&dll, why.missing_symbols_text()) {
                        (MqdError::NoDll { reason }, Some(symbols))
                            if why.lacks_queue_symbols() =>
                        {
                            MqdError::NotExported {
                                symbols,
                                dll: reason.clone(),
                            }
                        }
                        _ => MqdError::NoEngine {
                            native: why,
                            dll: Box::new(dll),
                        },
                    }
                }),
            },
        }
    }

    fn dll(
        probe: &dyn Target,
        options: ReaderOptions,
        fallback: Option<NativeError>,
    ) -> Result<Self> {
        let (path, source) = discover_dll(probe, options.dll.as_deref())?;
        let read_path = ReadPath::of_dll(probe)?;
        let (host, hosting) = match options.place {
            DllPlace::OutOfProcess(helper) => (
                open_out_of_process(&path, options.host, helper)?,
                DllHosting::OutOfProcess,
            ),
            DllPlace::InProcess => (
                crate::ffi::open_in_process_vouched(&path, options.host)?,
                DllHosting::InProcess,
            ),
        };
        Ok(QueueReader {
            inner: Inner::Dll {
                host,
                used: EngineUsed::Dll {
                    path,
                    source,
                    hosting,
                },
                path: read_path,
            },
            fallback,
            layouts: None,
        })
    }

    /// The engine in use.
    pub fn engine(&self) -> EngineUsed {
        match &self.inner {
            Inner::Native(w) => EngineUsed::Native(w.kind()),
            Inner::Dll { used, .. } => used.clone(),
        }
    }

    /// The shipped layout set in use, when the MPI's types come from one.
    pub fn layouts(&self) -> Option<&Chosen> {
        self.layouts.as_ref()
    }

    /// Why [`Engine::Auto`] chose the DLL: the native walkers' failure to recognise the
    /// process. `None` when a walker was chosen, the DLL was given, or the engine forced.
    pub fn fallback_reason(&self) -> Option<&NativeError> {
        self.fallback.as_ref()
    }

    /// Every communicator of `rank` (read through `target`) with its queues. With a DLL the
    /// process is attached, read and detached (also when the read fails).
    ///
    /// First the engine must show, from `target`'s own symbols and memory, that it reads
    /// where this rank keeps its pending operations (Open MPI: the selected PML is ob1;
    /// MPICH: the device records them where the engine reads): otherwise
    /// [`MqdError::Blind`], and the rank is not read — an empty queue read elsewhere would
    /// be a false all-clear. Where the engine sees all but the unexpected messages (MPICH
    /// ch4), those queues are [`crate::Queue::NoInformation`] with a note.
    ///
    /// With a shipped layout set, the set is proven on this rank first (its rank and the job's
    /// size checked when `rank` gives them): [`MqdError::Layouts`] when it does not fit.
    pub fn read(&mut self, rank: &ReadRank, target: Rc<dyn Target>) -> Result<RankQueues> {
        let target: Rc<dyn Target> = match &self.layouts {
            Some(chosen) => {
                let expect = Expect::rank(rank.global_rank, rank.job_size);
                layouts::prove_again(&*target, chosen, expect)?;
                Rc::new(ShippedTypes::new(target, Arc::clone(&chosen.set)))
            }
            None => target,
        };
        let sight = self.read_path().prove(&*target, &self.reader_name())?;
        let mut queues = self.read_unproven(rank, target)?;
        sight.apply(&mut queues);
        if let Some(chosen) = &self.layouts {
            let set = if chosen.other_release {
                format!(
                    "{} (for {}: same series)",
                    chosen.set.id(),
                    chosen.identity.release
                )
            } else {
                chosen.set.id()
            };
            queues.notes.push(ReadNote::ShippedTypes { set });
        }
        Ok(queues)
    }

    /// Where the engine reads.
    fn read_path(&self) -> ReadPath {
        match &self.inner {
            Inner::Native(w) => ReadPath::of_walker(w.kind()),
            Inner::Dll { path, .. } => *path,
        }
    }

    /// The engine as [`MqdError::Blind`] names it.
    fn reader_name(&self) -> String {
        match &self.inner {
            Inner::Native(w) => match w.kind() {
                WalkerKind::MpichCh3 => "MPICH ch3 walker".into(),
                WalkerKind::MpichDebugq => "MPICH debug-queue walker".into(),
                WalkerKind::OpenMpiOb1 => "Open MPI ob1 walker".into(),
            },
            Inner::Dll { used, .. } => match used {
                EngineUsed::Dll { path, .. } => {
                    format!("message-queue DLL {}", path.display())
                }
                other => other.to_string(),
            },
        }
    }

    fn read_unproven(&mut self, rank: &ReadRank, target: Rc<dyn Target>) -> Result<RankQueues> {
        match &mut self.inner {
            Inner::Native(walker) => {
                let info = ProcessInfo {
                    global_rank: rank.global_rank,
                };
                let walk = walker.queues(&*target, &info)?;
                let mut notes: Vec<ReadNote> = walk
                    .missing
                    .into_iter()
                    .map(|what| ReadNote::NotRead { what })
                    .collect();
                if let Some(error) = walk.communicators_error {
                    notes.push(ReadNote::CommunicatorsCutShort { error });
                }
                Ok(RankQueues::new(walk.communicators, notes))
            }
            Inner::Dll { host, .. } => {
                let spec = ProcessSpec::new(image_name(&rank.image), target, rank.global_rank);
                let id = host.attach(spec)?;
                let result = host.queues(id);
                let detached = host.detach(id);
                let communicators = result?;
                detached?;
                Ok(RankQueues::new(communicators, Vec::new()))
            }
        }
    }

    /// Ends the reader: what the DLL printed on its own meanwhile (deduplicated and counted),
    /// which only a DLL hosted out of process can collect; empty otherwise.
    pub fn finish(&mut self) -> OutputLog {
        match &mut self.inner {
            Inner::Native(_) => OutputLog::new(),
            Inner::Dll { host, .. } => host.finish_printed(),
        }
    }
}

/// The shipped (or given) layout set for `probe`, when it is a stock Open MPI process without
/// the types.
fn choose_layouts(probe: &dyn Target, options: &ReaderOptions) -> Result<Option<Chosen>> {
    let sets: Vec<Arc<LayoutSet>> = match &options.layouts {
        Layouts::Off => return Ok(None),
        Layouts::Shipped => layouts::shipped().to_vec(),
        Layouts::Given(sets) => sets.clone(),
    };
    if !layouts::needs_shipped(probe) {
        return Ok(None);
    }
    Ok(Some(layouts::choose_among(
        probe,
        &sets,
        Expect::nothing(),
    )?))
}

fn image_name(image: &Path) -> String {
    image.display().to_string()
}
