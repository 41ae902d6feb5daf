//! What the caller chooses for a whole session.

use std::path::PathBuf;
use std::time::Duration;

use mpir_acquire::AcquireOptions;
use mpir_mqd::ReaderOptions;
use mpir_target::debuginfo::SymbolStore;
use mpir_target::debuginfo::{DebugOptions, DebuginfodOptions};
use mpir_types::ranks::RankSet;

/// Settings of a [`Session`](crate::Session), built with `with_*` setters.
///
/// ```
/// use std::time::Duration;
/// use mpir_session::SessionOptions;
///
/// let options = SessionOptions::default()
///     .with_timeout(Duration::from_secs(20))
///     .with_debug_dir("/opt/mpich/debug")
///     .with_this_node_alias("node07-ib")
///     .with_ranks("0-3,7".parse().unwrap());
/// assert!(options.ranks().unwrap().contains(7));
/// ```
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    pub(crate) acquire: AcquireOptions,
    pub(crate) ranks: Option<RankSet>,
    pub(crate) hold_from_acquisition: bool,
    pub(crate) exe: Option<PathBuf>,
    pub(crate) reader: ReaderOptions,
    /// [`Session::queues`](crate::Session::queues) leaves the stacks out.
    pub(crate) queues_without_stacks: bool,
    /// Where source lookups are kept between runs: `None` as the environment says
    /// ([`SymbolStore::default_dir`]), `Some(None)` nowhere.
    pub(crate) symbol_store: Option<Option<PathBuf>>,
    /// Set by [`with_store_opened`](SessionOptions::with_store_opened): whether the store
    /// was looked at, and why it is not used.
    pub(crate) store_opened: bool,
    pub(crate) store_refused: Option<mpir_target::debuginfo::StoreError>,
}

impl SessionOptions {
    /// With these acquisition options as the base (debug directories, this node's facts and
    /// aliases, timeout, table reading bounds…). The session sets `hold`, `gate` and `ranks`
    /// itself for each step; what is given for them here is ignored.
    pub fn with_acquire_options(mut self, options: AcquireOptions) -> Self {
        self.acquire = options;
        self
    }

    /// Looking for symbols and types there, for the starter and every rank (debug
    /// directories, separate symbol files, types sidecars).
    pub fn with_debug_options(mut self, debug: DebugOptions) -> Self {
        self.acquire = self.acquire.with_debug(debug);
        self
    }

    /// With one more debug directory (build-id tree) for stripped programs.
    pub fn with_debug_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        let debug = self.acquire.debug.clone().with_debug_dir(dir);
        self.acquire = self.acquire.with_debug(debug);
        self
    }

    /// Whether and how separate debug files missing locally are fetched from debuginfod
    /// servers by build-id: by default as `DEBUGINFOD_URLS` says (as gdb and elfutils do);
    /// [`DebuginfodOptions::disabled`] never, [`DebuginfodOptions::enabled`] with named servers.
    ///
    /// ```
    /// use mpir_session::SessionOptions;
    /// use mpir_target::debuginfo::DebuginfodOptions;
    ///
    /// let options = SessionOptions::default()
    ///     .with_debug_dir("/opt/debug")
    ///     .with_debuginfod(DebuginfodOptions::enabled().with_url("http://debuginfod.example:8002"));
    /// let debug = options.debug_options();
    /// assert_eq!(debug.debuginfod.urls, ["http://debuginfod.example:8002"]);
    /// assert_eq!(debug.debug_dirs[0], std::path::Path::new("/opt/debug")); // kept
    /// ```
    pub fn with_debuginfod(mut self, debuginfod: DebuginfodOptions) -> Self {
        let debug = self.acquire.debug.clone().with_debuginfod(debuginfod);
        self.acquire = self.acquire.with_debug(debug);
        self
    }

    /// With a types sidecar: an object file whose DWARF describes the MPI's internal types
    /// (for MPI libraries shipped without debug information).
    pub fn with_types_sidecar(mut self, file: impl Into<PathBuf>) -> Self {
        let debug = self.acquire.debug.clone().with_types_sidecar(file.into());
        self.acquire = self.acquire.with_debug(debug);
        self
    }

    /// With `alias` naming this node too (a launcher reporting an address or an alias the
    /// machine's own facts do not list). Ranks on any other node are never touched.
    pub fn with_this_node_alias(mut self, alias: impl Into<String>) -> Self {
        self.acquire = self.acquire.with_alias(alias);
        self
    }

    /// Acquiring the job through this interface: by default whichever the launcher speaks
    /// (MPIR or MPI2DD from its symbols; the PMIx tool interface for a launcher with no MPIR
    /// symbol and a valid PMIx tool rendezvous file, such as Open MPI 5's `prterun`).
    pub fn with_interface(mut self, interface: mpir_acquire::InterfaceChoice) -> Self {
        self.acquire = self.acquire.with_interface(interface);
        self
    }

    /// With this bound on every wait (acquisition events, ranks stopping).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.acquire = self.acquire.with_timeout(timeout);
        self
    }

    /// With this wait for another tracer (another `mpir`, a debugger) to let go of the
    /// starter or a rank before it is reported as refused (`traced_by`); default 5 s, zero
    /// refuses at once ([`mpir_acquire::AcquireOptions::held_wait`]).
    pub fn with_held_wait(mut self, held_wait: Duration) -> Self {
        self.acquire = self.acquire.with_held_wait(held_wait);
        self
    }

    /// Touching ranks that belong to another user than the starter's (a privileged caller
    /// that knows why), or not (the default).
    pub fn with_allow_other_users(mut self, allow: bool) -> Self {
        self.acquire = self.acquire.with_allow_other_users(allow);
        self
    }

    /// Only these ranks are held and read (by their rank in the starter's table, or for core
    /// files in the starter core's table; cores whose rank is not known are kept). Processes
    /// named by pid have no table: the selection does not apply to them.
    pub fn with_ranks(mut self, ranks: RankSet) -> Self {
        self.ranks = Some(ranks);
        self
    }

    /// Keep the ranks the acquisition attaches stopped until the first [`hold`] takes them
    /// as they are (one acquisition instead of two, for a tool that reads at once), or
    /// [`hand_over`] gives them to another tool. Launch mode: the ranks stay stopped after the
    /// launch (their gate opens when they are released, as the spec says). Attach mode: the
    /// selected, proven local ranks are attached and held right away, their gate left alone.
    ///
    /// [`hold`]: crate::Session::hold
    /// [`hand_over`]: crate::Session::hand_over
    pub fn with_hold_from_acquisition(mut self, hold: bool) -> Self {
        self.hold_from_acquisition = hold;
        self
    }

    /// Core files: the executable the cores were dumped from, when a core does not lead to it
    /// (its file was moved or rebuilt).
    pub fn with_exe(mut self, exe: impl Into<PathBuf>) -> Self {
        self.exe = Some(exe.into());
        self
    }

    /// How queues are read ([`Session::queues`], [`Session::deadlock`]): the engine
    /// (by default the native walker when the MPI's types are known, else the MPI's DLL in a
    /// helper process), a DLL to use instead of the MPI's, the helper's options, bounds.
    ///
    /// [`Session::queues`]: crate::Session::queues
    /// [`Session::deadlock`]: crate::Session::deadlock
    pub fn with_reader_options(mut self, reader: ReaderOptions) -> Self {
        self.reader = reader;
        self
    }

    /// Without the Open MPI layout sets shipped with the library
    /// ([`ReaderOptions::without_shipped_layouts`]): a stock Open MPI's queues are then read only
    /// with types from its debug information or a types sidecar.
    pub fn without_shipped_layouts(mut self) -> Self {
        self.reader = self.reader.without_shipped_layouts();
        self
    }

    /// Whether [`Session::queues`] also unwinds each rank's threads while it is held
    /// ([`RankRead::stacks`], which [`QueueRead::analyze`] joins to the queues). On by default;
    /// a tool that shows the queues only turns it off, so that no rank stays stopped longer
    /// for stacks nobody reads. [`Session::deadlock`] always reads them.
    ///
    /// [`Session::queues`]: crate::Session::queues
    /// [`Session::deadlock`]: crate::Session::deadlock
    /// [`RankRead::stacks`]: crate::RankRead::stacks
    /// [`QueueRead::analyze`]: crate::QueueRead::analyze
    pub fn with_queue_stacks(mut self, stacks: bool) -> Self {
        self.queues_without_stacks = !stacks;
        self
    }

    /// Where the answers of symbol and source lookups (the symbols under a name, the function,
    /// file and line of an address, by file build-id) are kept between runs, so that a later
    /// read of the same libraries indexes no large symbol table and loads no DWARF again;
    /// `None`: nowhere. By default [`SymbolStore::default_dir`]: `$MPIR_SYMBOL_CACHE` when set
    /// (`off`: nowhere), else [`SymbolStore::conventional_dir`] when the home it lies in is
    /// this user's. A directory that is not this user's alone is not used
    /// ([`Session::symbol_store_problems`](crate::Session::symbol_store_problems) says why).
    pub fn with_symbol_store(mut self, dir: Option<PathBuf>) -> Self {
        self.symbol_store = Some(dir);
        self.store_opened = false;
        self.store_refused = None;
        self
    }

    /// These options with the symbol store opened and put in the debug options, so that the
    /// starter's and every rank's symbol lookups and the stacks' source lookups use it (once:
    /// later calls change nothing). A store that cannot be used is left out, with the reason.
    pub(crate) fn with_store_opened(mut self) -> Self {
        if self.store_opened {
            return self;
        }
        self.store_opened = true;
        let store = match self.symbol_store().map(SymbolStore::open) {
            Some(Ok(store)) => Some(store),
            Some(Err(e)) => {
                self.store_refused = Some(e);
                None
            }
            None => None,
        };
        let debug = self.acquire.debug.clone().with_symbol_store(store);
        self.acquire = self.acquire.with_debug(debug);
        self
    }

    /// Whether the store's place was chosen by the user
    /// ([`with_symbol_store`](SessionOptions::with_symbol_store), or `$MPIR_SYMBOL_CACHE`),
    /// not the default one: a named place that cannot be used is worth a warning, the default
    /// place's refusal only a note.
    pub fn symbol_store_named(&self) -> bool {
        self.symbol_store.is_some() || SymbolStore::named_by_environment()
    }

    /// The symbol store directory in force
    /// ([`with_symbol_store`](SessionOptions::with_symbol_store)).
    pub fn symbol_store(&self) -> Option<PathBuf> {
        match &self.symbol_store {
            Some(dir) => dir.clone(),
            None => SymbolStore::default_dir(),
        }
    }

    /// The acquisition options in force.
    pub fn acquire_options(&self) -> &AcquireOptions {
        &self.acquire
    }

    /// The debug options in force (for the starter and every rank).
    pub fn debug_options(&self) -> &DebugOptions {
        &self.acquire.debug
    }

    /// The rank selection, if any.
    pub fn ranks(&self) -> Option<&RankSet> {
        self.ranks.as_ref()
    }

    /// How queues are read ([`with_reader_options`](SessionOptions::with_reader_options)).
    pub fn reader_options(&self) -> &ReaderOptions {
        &self.reader
    }

    /// Whether queue reads unwind each rank's threads too
    /// ([`with_queue_stacks`](SessionOptions::with_queue_stacks)).
    pub fn queue_stacks(&self) -> bool {
        !self.queues_without_stacks
    }
}
