//! The helper side of out-of-process hosting: the body of the `mpir-mqd-host` executable.
//!
//! The helper loads the DLL with the ordinary in-process [`crate::Host`], whose targets are
//! [`RemoteTarget`]s: every memory read, symbol and type lookup a callback needs becomes a
//! question to the parent over the pipe (see `wire`). Reads are served from a page cache
//! that is emptied at the start of every request, so one walk of the queues sees one snapshot
//! and costs one round trip per page rather than per field.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufWriter, StdinLock};
use std::process::ExitCode;
use std::rc::Rc;

use mpir_target::{
    Fault, Memory, Symbol, SymbolKind, SymbolLookup, TargetError, TypeLookup, TypeQuery,
};
use mpir_types::{DataModel, TypeLayout};

use crate::error::MqdError;
use crate::host::{Host, HostOptions, ProcessId, ProcessSpec};
use crate::wire::{
    FromHelper, MAX_READ, Outcome, PROTOCOL_VERSION, ReadError, ToHelper, read_message,
    write_message,
};

/// Size of a cached page of target memory.
const PAGE: u64 = 4096;

struct Link {
    input: StdinLock<'static>,
    output: BufWriter<std::fs::File>,
    /// Set when the pipe failed: the helper exits after the current DLL call.
    broken: bool,
}

impl Link {
    fn send(&mut self, msg: &FromHelper) -> bool {
        if self.broken {
            return false;
        }
        if write_message(&mut self.output, &msg.encode()).is_err() {
            self.broken = true;
        }
        !self.broken
    }

    fn receive(&mut self) -> Result<ToHelper, ReadError> {
        let bytes = read_message(&mut self.input)?;
        ToHelper::decode(&bytes).map_err(ReadError::Framing)
    }

    /// Asks the parent a callback question and waits for the answer.
    fn ask(&mut self, question: &FromHelper) -> Result<ToHelper, String> {
        if !self.send(question) {
            return Err("the pipe to the debugger is broken".into());
        }
        match self.receive() {
            Ok(reply) => Ok(reply),
            Err(e) => {
                self.broken = true;
                Err(format!("the pipe to the debugger failed: {e}"))
            }
        }
    }
}

/// Cached bytes of one page: where in the page they start, and the bytes.
type CachedPage = (usize, Rc<[u8]>);

/// A process of the parent, seen from the helper.
struct RemoteTarget {
    id: u64,
    model: DataModel,
    link: Rc<RefCell<Link>>,
    cache_enabled: bool,
    /// Page address → (offset in the page where the bytes start, the bytes readable from
    /// there, possibly fewer than the rest of the page). The offset is 0 unless the start of
    /// the page was not readable (an object beginning mid-page after a hole).
    pages: RefCell<HashMap<u64, CachedPage>>,
}

impl RemoteTarget {
    fn remote_read(&self, address: u64, len: usize) -> Result<Vec<u8>, String> {
        let len = len.min(MAX_READ as usize) as u32;
        let reply = self.link.borrow_mut().ask(&FromHelper::Read {
            target: self.id,
            address,
            len,
        })?;
        match reply {
            ToHelper::ReadReply(Ok(bytes)) if bytes.len() <= len as usize => Ok(bytes),
            ToHelper::ReadReply(Ok(_)) => {
                self.link.borrow_mut().broken = true;
                Err("the debugger returned more bytes than asked".into())
            }
            ToHelper::ReadReply(Err(e)) => Err(e),
            other => {
                self.link.borrow_mut().broken = true;
                Err(format!("expected a read reply, got {other:?}"))
            }
        }
    }

    /// The cached bytes that hold `address`, and its index in them: read from the page's
    /// start the first time, else (a hole before `address`) from `address` to the page's end.
    fn cached(&self, address: u64) -> Option<(Rc<[u8]>, usize)> {
        let page = address & !(PAGE - 1);
        let off = (address - page) as usize;
        let hit = |start: usize, bytes: &Rc<[u8]>| {
            (off >= start && off - start < bytes.len()).then(|| (Rc::clone(bytes), off - start))
        };
        let known = self.pages.borrow().get(&page).cloned();
        if let Some((start, bytes)) = &known
            && let Some(h) = hit(*start, bytes)
        {
            return Some(h);
        }
        let mut from = if known.is_none() { page } else { address };
        loop {
            let want = (page + PAGE - from) as usize;
            let bytes: Rc<[u8]> = self.remote_read(from, want).unwrap_or_default().into();
            let start = (from - page) as usize;
            if let Some(h) = hit(start, &bytes) {
                self.pages.borrow_mut().insert(page, (start, bytes));
                return Some(h);
            }
            if known.is_none() && from == page && address != page {
                // Nothing readable at the page's start that reaches `address`: an object may
                // begin mid-page; try from `address` itself.
                self.pages.borrow_mut().insert(page, (start, bytes));
                from = address;
                continue;
            }
            return None;
        }
    }
}

impl Memory for RemoteTarget {
    fn data_model(&self) -> DataModel {
        self.model
    }

    fn read_partial(&self, address: u64, buf: &mut [u8]) -> mpir_target::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.cache_enabled
            && let Some((data, at)) = self.cached(address)
            && let Some(avail) = data.get(at..)
        {
            let n = buf.len().min(avail.len());
            buf[..n].copy_from_slice(&avail[..n]);
            return Ok(n);
        }
        // Not cacheable (unreadable here): ask for the exact bytes.
        match self.remote_read(address, buf.len()) {
            Ok(bytes) => {
                buf[..bytes.len()].copy_from_slice(&bytes);
                Ok(bytes.len())
            }
            Err(e) => Err(TargetError::Unreadable {
                address,
                len: buf.len() as u64,
                fault: Fault::Os(e),
            }),
        }
    }

    fn write(&self, address: u64, data: &[u8]) -> mpir_target::Result<()> {
        Err(TargetError::Unwritable {
            address,
            len: data.len() as u64,
            fault: Fault::Unsupported,
        })
    }
}

fn remote_failure(what: String, reason: String) -> TargetError {
    TargetError::Unsupported {
        operation: what,
        reason,
    }
}

impl SymbolLookup for RemoteTarget {
    fn symbol(&self, name: &str) -> mpir_target::Result<Option<Symbol>> {
        let reply = self.link.borrow_mut().ask(&FromHelper::Symbol {
            target: self.id,
            name: name.to_string(),
        });
        match reply {
            Ok(ToHelper::SymbolReply(Ok(found))) => Ok(found.map(|(address, kind)| {
                let kind = match kind {
                    0 => SymbolKind::Function,
                    1 => SymbolKind::Object,
                    _ => SymbolKind::Other,
                };
                Symbol::new(name, address, 0, kind)
            })),
            Ok(ToHelper::SymbolReply(Err(e))) => {
                Err(remote_failure(format!("symbol lookup of {name}"), e))
            }
            Ok(other) => {
                self.link.borrow_mut().broken = true;
                Err(remote_failure(
                    format!("symbol lookup of {name}"),
                    format!("unexpected reply {other:?}"),
                ))
            }
            Err(e) => Err(remote_failure(format!("symbol lookup of {name}"), e)),
        }
    }
}

impl TypeLookup for RemoteTarget {
    fn type_layout(&self, query: TypeQuery<'_>) -> mpir_target::Result<Option<TypeLayout>> {
        let TypeQuery::Named(name) = query else {
            return Ok(None);
        };
        let reply = self.link.borrow_mut().ask(&FromHelper::Type {
            target: self.id,
            name: name.to_string(),
        });
        match reply {
            Ok(ToHelper::TypeReply(Ok(t))) => Ok(t),
            Ok(ToHelper::TypeReply(Err(e))) => {
                Err(remote_failure(format!("type lookup of {name}"), e))
            }
            Ok(other) => {
                self.link.borrow_mut().broken = true;
                Err(remote_failure(
                    format!("type lookup of {name}"),
                    format!("unexpected reply {other:?}"),
                ))
            }
            Err(e) => Err(remote_failure(format!("type lookup of {name}"), e)),
        }
    }
}

fn not_loaded() -> MqdError {
    MqdError::Protocol {
        path: String::new(),
        reason: "no DLL loaded in the helper yet".into(),
    }
}

/// The helper's main loop: what `mpir-mqd-host` runs. Not for direct use; an
/// [`crate::OutOfProcessHost`] starts the executable and speaks to it over its stdin and stdout.
///
/// Exit status: 0 after a shutdown request or when the parent closes the pipe, 2 on a protocol
/// violation by the parent, 3 when the pipe broke during a DLL call.
pub fn helper_main() -> ExitCode {
    crate::ffi::die_with_parent();
    let output = match crate::ffi::protocol_stdout() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("mpir-mqd-host: cannot set up the protocol pipe: {e}");
            return ExitCode::from(2);
        }
    };
    let link = Rc::new(RefCell::new(Link {
        input: std::io::stdin().lock(),
        output: BufWriter::new(output),
        broken: false,
    }));
    let hello = FromHelper::Hello {
        version: PROTOCOL_VERSION,
        pid: std::process::id(),
    };
    if !link.borrow_mut().send(&hello) {
        return ExitCode::from(3);
    }
    let mut host: Option<Host> = None;
    let mut cache_enabled = true;
    let mut targets: Vec<Rc<RemoteTarget>> = Vec::new();
    loop {
        let request = link.borrow_mut().receive();
        let request = match request {
            Ok(r) => r,
            Err(ReadError::Closed) => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("mpir-mqd-host: bad request: {e}");
                return ExitCode::from(2);
            }
        };
        for t in &targets {
            t.pages.borrow_mut().clear();
        }
        let outcome = match request {
            ToHelper::Load {
                path,
                max_communicators,
                max_operations,
                max_group_size,
                max_new_processes,
                read_cache,
            } => {
                if host.is_some() {
                    Err(MqdError::AlreadyHosted { path })
                } else {
                    cache_enabled = read_cache;
                    let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
                    let mut options = HostOptions::default()
                        .with_bounds(size(max_communicators), size(max_operations));
                    options.max_group_size = size(max_group_size);
                    options.max_new_processes = size(max_new_processes);
                    crate::ffi::load_in_helper(std::path::Path::new(&path), options).map(|h| {
                        let loaded = Outcome::Loaded {
                            version: h.version().to_string(),
                            compatibility: h.compatibility(),
                            taddr_width: h.taddr_width(),
                            optional: h.optional_exports().iter().map(|s| s.to_string()).collect(),
                        };
                        host = Some(h);
                        loaded
                    })
                }
            }
            ToHelper::Attach {
                target,
                image_name,
                global_rank,
                model,
            } => match host.as_mut() {
                None => Err(not_loaded()),
                Some(h) => {
                    let remote = Rc::new(RemoteTarget {
                        id: target,
                        model,
                        link: Rc::clone(&link),
                        cache_enabled,
                        pages: RefCell::new(HashMap::new()),
                    });
                    targets.push(Rc::clone(&remote));
                    h.attach(ProcessSpec {
                        image_name,
                        target: remote,
                        global_rank,
                    })
                    .map(|id| {
                        let (process, image) = id.to_raw();
                        let (i, p) = h.queue_messages(id);
                        Outcome::Attached {
                            process,
                            image,
                            image_message: i.map(str::to_string),
                            process_message: p.map(str::to_string),
                        }
                    })
                }
            },
            ToHelper::Detach { process, image } => match host.as_mut() {
                None => Err(not_loaded()),
                Some(h) => h
                    .detach(ProcessId::from_raw(process, image))
                    .map(|()| Outcome::Detached),
            },
            ToHelper::Queues { process, image } => match host.as_mut() {
                None => Err(not_loaded()),
                Some(h) => h
                    .raw_queues(ProcessId::from_raw(process, image))
                    .map(Outcome::Queues),
            },
            ToHelper::NewProcesses { process, image } => match host.as_mut() {
                None => Err(not_loaded()),
                Some(h) => h
                    .new_processes(ProcessId::from_raw(process, image))
                    .map(Outcome::NewProcesses),
            },
            ToHelper::SpawnBreakpoint { process, image } => match host.as_mut() {
                None => Err(not_loaded()),
                Some(h) => h
                    .spawn_breakpoint_name(ProcessId::from_raw(process, image))
                    .map(Outcome::SpawnBreakpoint),
            },
            ToHelper::Shutdown => {
                drop(host.take());
                let done = FromHelper::Done {
                    outcome: Ok(Outcome::ShutDown),
                    messages: Vec::new(),
                };
                link.borrow_mut().send(&done);
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("mpir-mqd-host: unexpected {other:?} outside a callback");
                return ExitCode::from(2);
            }
        };
        if link.borrow().broken {
            return ExitCode::from(3);
        }
        let done = FromHelper::Done {
            outcome,
            messages: host.as_ref().map(Host::dll_messages).unwrap_or_default(),
        };
        if !link.borrow_mut().send(&done) {
            return ExitCode::from(3);
        }
    }
}
