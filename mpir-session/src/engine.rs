//! The queue engine behind [`Session::queues`](crate::Session::queues): a small private
//! adapter over `mpir-mqd`'s engines (the native walkers, the MPI's DLL hosted out of
//! process). The choice (native when the MPI's types are known, else the DLL, or as the
//! caller forces) and the fallback reason live here, not in tools.

use std::path::PathBuf;
use std::rc::Rc;

use mpir_mqd::native::{self, ProcessInfo, WalkOptions, Walker, WalkerKind};
use mpir_mqd::{
    CommunicatorQueues, HelperOptions, HostOptions, MqdError, OutOfProcessHost, ProcessSpec,
    QueueHost,
};
use mpir_target::Target;

pub use mpir_mqd::native::Engine;

use crate::error::{SessionError, chain};
use crate::hold::HeldRank;

/// How queues are read: the engine, and what each engine needs.
#[derive(Debug, Clone, Default)]
pub struct QueueOptions {
    pub(crate) engine: Engine,
    pub(crate) dll: Option<PathBuf>,
    pub(crate) helper: HelperOptions,
    pub(crate) walk: WalkOptions,
}

impl QueueOptions {
    /// With this engine: [`Engine::Auto`] (the default) takes the native walker when the
    /// MPI's layouts are known (it sees more: unexpected messages, global ranks, groups), else
    /// the MPI's message-queue DLL.
    pub fn with_engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }

    /// With this message-queue DLL instead of the one the MPI names (with [`Engine::Auto`],
    /// a DLL given is the one used).
    pub fn with_dll(mut self, dll: impl Into<PathBuf>) -> Self {
        self.dll = Some(dll.into());
        self
    }

    /// With these options for the helper process that hosts the DLL (a tool that is its own
    /// helper names itself here: [`HelperOptions::with_program_args`]).
    pub fn with_helper(mut self, helper: HelperOptions) -> Self {
        self.helper = helper;
        self
    }

    /// With these bounds for the native walkers.
    pub fn with_walk_options(mut self, walk: WalkOptions) -> Self {
        self.walk = walk;
        self
    }
}

/// One rank's queues as an engine read them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RankQueues {
    /// Every communicator with its three queues.
    pub communicators: Vec<CommunicatorQueues>,
    /// What is missing from an otherwise good result.
    pub notes: Vec<String>,
}

impl RankQueues {
    /// The rank's own `MPI_COMM_WORLD` rank, as its `MPI_COMM_WORLD` communicator says.
    pub fn world_rank(&self) -> Option<u64> {
        self.communicators
            .iter()
            .find(|c| c.communicator.name == "MPI_COMM_WORLD")
            .and_then(|c| u64::try_from(c.communicator.local_rank).ok())
    }
}

/// The engine in use, set up from one rank's target.
pub(crate) enum Reader {
    Native(Walker),
    Dll(Box<OutOfProcessHost>),
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl Reader {
    /// The engine `options` ask for, for the MPI of `probe`.
    pub(crate) fn open(probe: &dyn Target, options: &QueueOptions) -> Result<Self, SessionError> {
        let native = || native::detect(probe, &options.walk).map(Reader::Native);
        let dll = || -> Result<Reader, MqdError> {
            let (path, _source) = mpir_mqd::discover_dll(probe, options.dll.as_deref())?;
            let host =
                OutOfProcessHost::spawn(path, HostOptions::default(), options.helper.clone())?;
            Ok(Reader::Dll(Box::new(host)))
        };
        match options.engine {
            Engine::Dll => dll().map_err(SessionError::Reader),
            Engine::Native => native().map_err(|e| SessionError::Reader(MqdError::Native(e))),
            // A DLL named is the one wanted.
            _ if options.dll.is_some() => dll().map_err(SessionError::Reader),
            _ => native().or_else(|_| dll().map_err(SessionError::Reader)),
        }
    }

    /// What a document calls it.
    pub(crate) fn name(&self) -> String {
        match self {
            Reader::Native(w) => match w.kind() {
                WalkerKind::MpichCh3 => "native MPICH ch3".into(),
                WalkerKind::MpichDebugq => "native MPICH debug queues".into(),
                WalkerKind::OpenMpiOb1 => "native Open MPI ob1".into(),
                other => format!("native {other:?}"),
            },
            Reader::Dll(h) => format!("dll {}", h.path()),
        }
    }

    /// Reads one held rank.
    pub(crate) fn read(
        &mut self,
        rank: &HeldRank,
        target: &Rc<dyn Target>,
    ) -> Result<RankQueues, MqdError> {
        match self {
            Reader::Native(w) => {
                let info = rank
                    .rank
                    .map_or_else(ProcessInfo::default, ProcessInfo::with_global_rank);
                let walk = w.queues(&**target, &info).map_err(MqdError::Native)?;
                let mut notes: Vec<String> = walk
                    .missing
                    .iter()
                    .map(|m| format!("not read: {m}"))
                    .collect();
                if let Some(e) = &walk.communicators_error {
                    notes.push(format!("communicator list cut short: {}", chain(e)));
                }
                Ok(RankQueues {
                    communicators: walk.communicators,
                    notes,
                })
            }
            Reader::Dll(host) => {
                let spec = ProcessSpec {
                    image_name: rank.image.display().to_string(),
                    target: Rc::clone(target),
                    global_rank: rank.rank.and_then(|r| i32::try_from(r).ok()).unwrap_or(-1),
                };
                let id = host.attach(spec)?;
                let result = host.queues(id);
                let detached = host.detach(id);
                let communicators = result?;
                detached?;
                Ok(RankQueues {
                    communicators,
                    notes: Vec::new(),
                })
            }
        }
    }

    /// Ends the reader: what the MPI's DLL printed on its own meanwhile, as notes.
    pub(crate) fn finish(mut self) -> Vec<String> {
        match &mut self {
            Reader::Native(_) => Vec::new(),
            Reader::Dll(host) => {
                let path = host.path().to_string();
                host.finish_printed()
                    .notes()
                    .into_iter()
                    .map(|l| format!("the DLL {path} printed: {l}"))
                    .collect()
            }
        }
    }
}
