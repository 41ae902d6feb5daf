//! The MPICH walk: communicators (retried while `MPIR_All_communicators` changes), their
//! groups, and the three queues, each list walked once and dealt out by context id.

use std::cell::RefCell;
use std::collections::HashMap;

use mpir_target::{Symbol, Target};
use mpir_types::mqd::{self, LengthUnit, OpStatus};

use super::{MpichLayout, Queues, RequestLayout};
use crate::error::native::{NativeError, NativeResult};
use crate::model::CommOrigin;
use crate::native::snapshot::{ListGuard, Obj, Snapshot};
use crate::native::{
    ProcessInfo, RawComm, RawOp, RawQueue, Walk, WalkOptions, WalkTally, blank_op, read_fresh,
    walk_until_stable,
};

/// `MPIR_COMM_HIERARCHY_KIND__NODE_ROOTS` and `__NODE`: communicators MPICH makes for its
/// hierarchical collectives.
const INTERNAL_HIERARCHY: [i64; 2] = [2, 3];
/// `HANDLE_KIND_BUILTIN` in bits 30-31 of an MPICH handle.
const HANDLE_KIND_BUILTIN: u64 = 1;
const HANDLE_KIND_DIRECT: u64 = 2;
/// `MPIR_DATATYPE` in bits 26-29 of an MPICH handle.
const HANDLE_MPI_KIND_DATATYPE: u64 = 3;

fn handle_kind(h: u64) -> u64 {
    (h >> 30) & 3
}

fn require(t: &dyn Target, name: &str) -> NativeResult<Symbol> {
    t.symbol(name)
        .map_err(|source| NativeError::Lookup {
            name: name.to_string(),
            source,
        })?
        .ok_or_else(|| NativeError::MissingLayout {
            walker: "MPICH",
            missing: vec![format!("symbol {name}")],
            missing_types: Vec::new(),
        })
}

fn optional(t: &dyn Target, name: &str) -> NativeResult<Option<Symbol>> {
    t.symbol(name).map_err(|source| NativeError::Lookup {
        name: name.to_string(),
        source,
    })
}

/// A communicator as read.
struct CommRec {
    address: u64,
    handle: Option<u64>,
    context_id: u64,
    recvcontext_id: u64,
    rank: i64,
    local_size: i64,
    kind: Option<i64>,
    hierarchy: Option<i64>,
    name: String,
    local_group: u64,
    vcrt: u64,
}

/// One queue list, read: (context id, operation) in list order, and what cut it short.
type ListOps = (Vec<(u64, RawOp)>, Option<NativeError>);

struct Ctx<'a, 's> {
    l: &'a MpichLayout,
    s: &'a Snapshot<'s>,
    o: &'a WalkOptions,
    hops: u64,
    missing: Vec<String>,
    dt_direct: Option<Symbol>,
    dt_sizes: RefCell<HashMap<u64, Option<u64>>>,
}

/// Walks `l`'s lists in the process behind `s`.
pub(crate) fn walk(
    l: &MpichLayout,
    s: &Snapshot<'_>,
    process: &ProcessInfo,
    o: &WalkOptions,
) -> NativeResult<Walk> {
    let t = s.target();
    let list = require(t, "MPIR_All_communicators")?;
    let mut cx = Ctx {
        l,
        s,
        o,
        hops: 0,
        missing: Vec::new(),
        dt_direct: match l.datatype {
            Some(_) => optional(t, "MPIR_Datatype_direct")?,
            None => None,
        },
        dt_sizes: RefCell::new(HashMap::new()),
    };
    let seq_at = list.address.wrapping_add(l.list.seq.offset);
    let fresh_seq = || -> NativeResult<i64> {
        let what = "MPIR_All_communicators.sequence_number";
        let b = read_fresh(s, seq_at, l.list.seq.size, what)?;
        Ok(mpir_types::View::new(s.model(), seq_at, &b)
            .int(0, l.list.seq.size, "sequence_number")
            .unwrap_or(-1))
    };
    walk_until_stable(s, &mut cx, o.max_attempts, fresh_seq, |cx| {
        cx.attempt(&list, process)
    })
}

impl WalkTally for Ctx<'_, '_> {
    fn missing_mut(&mut self) -> &mut Vec<String> {
        &mut self.missing
    }
    fn hops(&self) -> u64 {
        self.hops
    }
}

impl Ctx<'_, '_> {
    fn attempt(
        &mut self,
        list: &Symbol,
        process: &ProcessInfo,
    ) -> NativeResult<(Vec<RawComm>, Option<NativeError>)> {
        let l = self.l;
        let head_obj = self
            .s
            .obj(list.address, l.list.size, "MPIR_All_communicators")?;
        let mut at = head_obj.uint(l.list.head, "MPIR_All_communicators.head")?;
        let mut guard = ListGuard::new("MPIR_All_communicators", self.o.max_communicators);
        let mut comms = Vec::new();
        let mut incomplete = None;
        while at != 0 {
            if let Err(e) = guard.admit(at) {
                incomplete = Some(e);
                break;
            }
            match self.comm(at) {
                Ok((c, next)) => {
                    comms.push(c);
                    at = next;
                }
                Err(e) => {
                    incomplete = Some(e);
                    break;
                }
            }
        }
        self.hops += guard.hops() as u64;
        let (world, icomm) = self.world(&comms)?;
        let world_vcs = match world.and_then(|w| comms.iter().find(|c| c.address == w)) {
            Some(w) if w.vcrt != 0 => match self.vc_table(w.vcrt) {
                Ok(vcs) => Some(vcs),
                Err(e) => {
                    self.missing.push(format!("world VC table: {e}"));
                    None
                }
            },
            _ => None,
        };
        let lists = self.queue_lists();
        let mut out = Vec::with_capacity(comms.len());
        for c in comms {
            let group = self.group(&c, world, world_vcs.as_deref(), process);
            let origin = if icomm == Some(c.address)
                || c.hierarchy.is_some_and(|h| INTERNAL_HIERARCHY.contains(&h))
            {
                CommOrigin::Internal
            } else if c
                .handle
                .is_some_and(|h| handle_kind(h) == HANDLE_KIND_BUILTIN)
                || world == Some(c.address)
            {
                CommOrigin::Predefined
            } else if c.handle.is_none() {
                CommOrigin::from_dll_name(&c.name)
            } else {
                CommOrigin::User
            };
            let no_sends = matches!(&l.queues, Queues::Ch3 { sendq: None, .. });
            let queues = [
                if no_sends {
                    RawQueue::none()
                } else {
                    deal(&lists[0], c.context_id)
                },
                deal(&lists[1], c.recvcontext_id),
                deal(&lists[2], c.recvcontext_id),
            ];
            out.push(RawComm {
                communicator: mqd::Communicator {
                    unique_id: c.address,
                    local_rank: c.rank,
                    size: c.local_size,
                    name: c.name,
                },
                origin,
                group,
                key: c.recvcontext_id,
                queues,
            });
        }
        Ok((out, incomplete))
    }

    fn comm(&self, at: u64) -> NativeResult<(CommRec, u64)> {
        let c = &self.l.comm;
        let o = self.s.obj(at, c.span, "MPIR_Comm")?;
        let opt_u = |f: Option<mpir_types::FieldLayout>, w: &str| -> NativeResult<Option<u64>> {
            f.map(|f| o.uint(f, w)).transpose()
        };
        let opt_i = |f: Option<mpir_types::FieldLayout>, w: &str| -> NativeResult<Option<i64>> {
            f.map(|f| o.int(f, w)).transpose()
        };
        let rec = CommRec {
            address: at,
            handle: opt_u(c.handle, "MPIR_Comm.handle")?,
            context_id: o.uint(c.context_id, "MPIR_Comm.context_id")?,
            recvcontext_id: o.uint(c.recvcontext_id, "MPIR_Comm.recvcontext_id")?,
            rank: o.int(c.rank, "MPIR_Comm.rank")?,
            local_size: o.int(c.local_size, "MPIR_Comm.local_size")?,
            kind: opt_i(c.kind, "MPIR_Comm.comm_kind")?,
            hierarchy: opt_i(c.hierarchy, "MPIR_Comm.hierarchy_kind")?,
            name: o.text(c.name, "MPIR_Comm.name")?,
            local_group: opt_u(c.local_group, "MPIR_Comm.local_group")?.unwrap_or(0),
            vcrt: opt_u(c.vcrt, "MPIR_Comm.dev.vcrt")?.unwrap_or(0),
        };
        if !(0..=1 << 31).contains(&rec.local_size) {
            return Err(NativeError::Corrupt {
                what: "MPIR_Comm.local_size".into(),
                address: at,
                reason: format!("{} is no communicator size", rec.local_size),
            });
        }
        let next = o.uint(c.next, "MPIR_Comm.comm_next")?;
        Ok((rec, next))
    }

    /// (world communicator, MPICH's internal world copy).
    fn world(&mut self, comms: &[CommRec]) -> NativeResult<(Option<u64>, Option<u64>)> {
        if let Some(p) = &self.l.process
            && let Some(sym) = optional(self.s.target(), "MPIR_Process")?
        {
            let end = p.comm_world.end().max(p.icomm_world.and_then(|f| f.end()));
            let o = self.s.obj(sym.address, end.unwrap_or(0), "MPIR_Process")?;
            let world = o.uint(p.comm_world, "MPIR_Process.comm_world")?;
            let icomm = p
                .icomm_world
                .map(|f| o.uint(f, "MPIR_Process.icomm_world"))
                .transpose()?;
            return Ok((Some(world).filter(|&w| w != 0), icomm.filter(|&i| i != 0)));
        }
        // The world is the intracommunicator of context id 0 in every MPICH.
        let world = comms
            .iter()
            .find(|c| c.recvcontext_id == 0 && c.kind.unwrap_or(0) == 0)
            .map(|c| c.address);
        Ok((world, None))
    }

    /// The VC pointers of a `MPIDI_VCRT`.
    fn vc_table(&self, vcrt: u64) -> NativeResult<Vec<u64>> {
        let v = self.l.vcrt.as_ref().ok_or_else(|| NativeError::Corrupt {
            what: "MPIDI_VCRT".into(),
            address: vcrt,
            reason: "no layout".into(),
        })?;
        let o = self.s.obj(vcrt, v.size.end().unwrap_or(0), "MPIDI_VCRT")?;
        let n = o.int(v.size, "MPIDI_VCRT.size")?;
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.o.max_group_size)
            .ok_or_else(|| NativeError::Corrupt {
                what: "MPIDI_VCRT.size".into(),
                address: vcrt,
                reason: format!("{n} entries"),
            })?;
        self.s
            .pointers(vcrt.wrapping_add(v.table.offset), n, "MPIDI_VCRT.vcr_table")
    }

    /// World ranks of `c`'s members: from its group's lpids, else its VCs' places in the
    /// world's VC table, else what the communicator itself implies.
    fn group(
        &mut self,
        c: &CommRec,
        world: Option<u64>,
        world_vcs: Option<&[u64]>,
        process: &ProcessInfo,
    ) -> Option<Vec<i64>> {
        let n = usize::try_from(c.local_size).ok()?;
        if n > self.o.max_group_size {
            self.missing.push(format!(
                "group of {:#x}: {n} members, over the bound",
                c.address
            ));
            return None;
        }
        if c.local_group != 0
            && let Some(g) = &self.l.group
        {
            match self.lpids(c.local_group, g, n) {
                Ok(v) => return Some(v),
                Err(e) => self.missing.push(format!("group of {:#x}: {e}", c.address)),
            }
        }
        if c.vcrt != 0
            && let Some(wv) = world_vcs
        {
            match self.vc_table(c.vcrt) {
                Ok(vcs) => {
                    let index: HashMap<u64, i64> =
                        wv.iter().enumerate().map(|(i, &v)| (v, i as i64)).collect();
                    return Some(
                        vcs.iter()
                            .take(n)
                            .map(|v| index.get(v).copied().unwrap_or(-1))
                            .collect(),
                    );
                }
                Err(e) => self
                    .missing
                    .push(format!("VC table of {:#x}: {e}", c.address)),
            }
        }
        if world == Some(c.address) {
            return Some((0..n as i64).collect());
        }
        if n == 1 && c.kind.unwrap_or(0) == 0 {
            return process.global_rank.map(|r| vec![r as i64]);
        }
        None
    }

    fn lpids(&self, group: u64, g: &super::GroupLayout, n: usize) -> NativeResult<Vec<i64>> {
        let o = self.s.obj(group, g.span, "MPIR_Group")?;
        let size = o.int(g.size, "MPIR_Group.size")?;
        if size != n as i64 {
            return Err(NativeError::Corrupt {
                what: "MPIR_Group.size".into(),
                address: group,
                reason: format!("{size} members for a communicator of {n}"),
            });
        }
        let table = o.uint(g.pmap, "MPIR_Group.lrank_to_lpid")?;
        let bytes = g.pmap_size.saturating_mul(n as u64);
        let t = self.s.obj(table, bytes, "MPIR_Group.lrank_to_lpid")?;
        (0..n as u64)
            .map(|i| {
                let f = mpir_types::FieldLayout::new(i * g.pmap_size + g.lpid.offset, g.lpid.size);
                t.int(f, "MPII_Group_pmap_t.lpid")
            })
            .collect()
    }

    /// Element size of datatype handle `h`, when MPICH's data says.
    fn datatype_size(&self, h: u64) -> Option<u64> {
        if let Some(v) = self.dt_sizes.borrow().get(&h) {
            return *v;
        }
        let size = if (h >> 26) & 0xf != HANDLE_MPI_KIND_DATATYPE {
            None
        } else if handle_kind(h) == HANDLE_KIND_BUILTIN {
            Some((h >> 8) & 0xff)
        } else if handle_kind(h) == HANDLE_KIND_DIRECT {
            self.direct_datatype_size(h & 0x03ff_ffff)
        } else {
            None
        };
        self.dt_sizes.borrow_mut().insert(h, size);
        size
    }

    fn direct_datatype_size(&self, index: u64) -> Option<u64> {
        let d = self.l.datatype.as_ref()?;
        let sym = self.dt_direct.as_ref()?;
        let off = index.checked_mul(d.stride)?;
        if sym.size != 0 && off.checked_add(d.stride)? > sym.size {
            return None;
        }
        let o = self
            .s
            .obj(sym.address.checked_add(off)?, d.stride, "MPIR_Datatype")
            .ok()?;
        u64::try_from(o.int(d.size, "MPIR_Datatype.size").ok()?).ok()
    }

    /// Sends, posted receives, unexpected messages.
    fn queue_lists(&mut self) -> [ListOps; 3] {
        let t = self.s.target();
        match &self.l.queues {
            Queues::Ch3 { req, sendq } => {
                let head_via = |name: &str| -> NativeResult<u64> {
                    let sym = require(t, name)?;
                    let var = self.s.pointer(sym.address, name)?;
                    self.s.pointer(var, name)
                };
                let sends = match sendq {
                    None => (Vec::new(), None),
                    Some(q) => match optional(t, "MPIR_Sendq_head").and_then(|s| {
                        let s = s.ok_or_else(|| NativeError::MissingLayout {
                            walker: "MPICH",
                            missing: vec!["symbol MPIR_Sendq_head".into()],
                            missing_types: Vec::new(),
                        })?;
                        self.s.pointer(s.address, "MPIR_Sendq_head")
                    }) {
                        Ok(head) => self.sendq(head, q, req),
                        Err(e) => (Vec::new(), Some(e)),
                    },
                };
                let posted = match head_via("MPID_Recvq_posted_head_ptr") {
                    Ok(h) => self.requests(h, req, false),
                    Err(e) => (Vec::new(), Some(e)),
                };
                let unexpected = match head_via("MPID_Recvq_unexpected_head_ptr") {
                    Ok(h) => self.requests(h, req, true),
                    Err(e) => (Vec::new(), Some(e)),
                };
                if sendq.is_none() {
                    self.missing.push("the send queue (MPIR_Sendq)".into());
                }
                [sends, posted, unexpected]
            }
            Queues::Debugq { .. } => ["MPIR_Sendq_head", "MPIR_Recvq_head", "MPIR_Unexpq_head"]
                .map(
                    |name| match require(t, name).and_then(|s| self.s.pointer(s.address, name)) {
                        Ok(h) => self.debugq(h, name),
                        Err(e) => (Vec::new(), Some(e)),
                    },
                ),
        }
    }

    /// Walks one queue list from `at` under a [`ListGuard`] named `what`: `entry` decodes the
    /// element at an address into its context id, its operation and the next address. A
    /// failing element ends the list with that error, keeping what came before.
    fn op_list(
        &mut self,
        mut at: u64,
        what: &str,
        entry: impl Fn(&Self, u64) -> NativeResult<(u64, RawOp, u64)>,
    ) -> ListOps {
        let mut guard = ListGuard::new(what, self.o.max_operations);
        let mut ops = Vec::new();
        let mut error = None;
        while at != 0 {
            if let Err(e) = guard.admit(at) {
                error = Some(e);
                break;
            }
            match entry(self, at) {
                Ok((ctx, op, next)) => {
                    ops.push((ctx, op));
                    at = next;
                }
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        self.hops += guard.hops() as u64;
        (ops, error)
    }

    /// A ch3 request list (`MPIR_Request.next`).
    fn requests(&mut self, at: u64, r: &RequestLayout, unexpected: bool) -> ListOps {
        let what = if unexpected {
            "unexpected queue"
        } else {
            "posted receive queue"
        };
        self.op_list(at, what, |this, at| this.request(at, r, unexpected))
    }

    fn request(
        &self,
        at: u64,
        r: &RequestLayout,
        unexpected: bool,
    ) -> NativeResult<(u64, RawOp, u64)> {
        let o = self.s.obj(at, r.span, "MPIR_Request")?;
        let cc = o.int(r.cc, "MPIR_Request.cc")?;
        let tag = o.int(r.tag, "MPIR_Request.dev.match.parts.tag")?;
        let rank = o.int(r.rank, "MPIR_Request.dev.match.parts.rank")?;
        let ctx = o.uint(r.context_id, "MPIR_Request.dev.match.parts.context_id")?;
        let mut op = blank_op();
        op.status = status_of(cc);
        op.desired_local_rank = if rank >= 0 { rank } else { -1 };
        op.actual_local_rank = rank;
        op.actual_tag = tag;
        let unit = if unexpected {
            // The message's size in bytes (from its header); its data sits in the device's
            // temporary buffer until a receive matches.
            let bytes = opt(&o, r.recv_data_sz, "MPIDI_Request.recv_data_sz")?;
            op.tag_wild = false;
            op.desired_tag = tag;
            op.desired_length = bytes.unwrap_or(-1);
            op.actual_length = op.desired_length;
            op.buffer = r
                .tmpbuf
                .map(|f| o.uint(f, "MPIDI_Request.tmpbuf"))
                .transpose()?
                .unwrap_or(0);
            // Eager data waits in that buffer; a rendezvous header has none yet (its data is
            // still in the sender's buffer, and the sender is waiting for a receive).
            op.system_buffer = op.buffer != 0 || r.tmpbuf.is_none();
            LengthUnit::Bytes
        } else {
            op.tag_wild = tag < 0;
            op.desired_tag = if tag >= 0 { tag } else { -1 };
            op.desired_length = o.int(r.user_count, "MPIDI_Request.user_count")?;
            op.buffer = o.uint(r.user_buf, "MPIDI_Request.user_buf")?;
            let dt = o.uint(r.datatype, "MPIDI_Request.datatype")?;
            LengthUnit::Elements {
                element_size: self.datatype_size(dt),
            }
        };
        let next = o.uint(r.next, "MPIR_Request.next")?;
        Ok((ctx, RawOp { op, unit }, next))
    }

    /// The ch3 send queue (`MPIR_Sendq`, each entry pointing at its request).
    fn sendq(&mut self, at: u64, q: &super::SendqLayout, r: &RequestLayout) -> ListOps {
        self.op_list(at, "send queue", |this, at| this.sendq_entry(at, q, r))
    }

    fn sendq_entry(
        &self,
        at: u64,
        q: &super::SendqLayout,
        r: &RequestLayout,
    ) -> NativeResult<(u64, RawOp, u64)> {
        let o = self.s.obj(at, q.span, "MPIR_Sendq")?;
        let sreq = o.uint(q.sreq, "MPIR_Sendq.sreq")?;
        let rank = o.int(q.rank, "MPIR_Sendq.rank")?;
        let tag = o.int(q.tag, "MPIR_Sendq.tag")?;
        let ctx = o.uint(q.context_id, "MPIR_Sendq.context_id")?;
        let ro = self.s.obj(sreq, r.span, "MPIR_Sendq.sreq")?;
        let mut op = blank_op();
        let cc = ro.int(r.cc, "MPIR_Request.cc")?;
        op.status = status_of(cc);
        op.desired_local_rank = rank;
        op.actual_local_rank = rank;
        op.desired_tag = tag;
        op.actual_tag = tag;
        op.desired_length = ro.int(r.user_count, "MPIDI_Request.user_count")?;
        op.actual_length = op.desired_length;
        op.buffer = ro.uint(r.user_buf, "MPIDI_Request.user_buf")?;
        op.extra_text = vec!["Non-blocking send".into()];
        let dt = ro.uint(r.datatype, "MPIDI_Request.datatype")?;
        let unit = LengthUnit::Elements {
            element_size: self.datatype_size(dt),
        };
        Ok((ctx, RawOp { op, unit }, o.uint(q.next, "MPIR_Sendq.next")?))
    }

    /// An MPICH ≥ 4.1 debug queue (`MPIR_Debugq`).
    fn debugq(&mut self, at: u64, name: &str) -> ListOps {
        let l = self.l;
        let Queues::Debugq { dq, cc } = &l.queues else {
            return (Vec::new(), None);
        };
        self.op_list(at, name, |this, at| {
            this.debugq_entry(at, name, dq, cc.as_ref())
        })
    }

    fn debugq_entry(
        &self,
        at: u64,
        name: &str,
        dq: &super::DebugqLayout,
        cc: Option<&mpir_types::FieldLayout>,
    ) -> NativeResult<(u64, RawOp, u64)> {
        let class_send = name == "MPIR_Sendq_head";
        let unexpected = name == "MPIR_Unexpq_head";
        let o = self.s.obj(at, dq.span, "MPIR_Debugq")?;
        let req = o.uint(dq.req, "MPIR_Debugq.req")?;
        let tag = o.int(dq.tag, "MPIR_Debugq.tag")?;
        let rank = o.int(dq.rank, "MPIR_Debugq.rank")?;
        let ctx = o.uint(dq.context_id, "MPIR_Debugq.context_id")?;
        let count = o.int(dq.count, "MPIR_Debugq.count")?;
        let buf = o.uint(dq.buf, "MPIR_Debugq.buf")?;
        let mut op = blank_op();
        if let (Some(f), true) = (cc, req != 0) {
            let c = self.s.obj(req, f.end().unwrap_or(0), "MPIR_Debugq.req")?;
            let v = c.int(*f, "MPIR_Request.cc")?;
            op.status = status_of(v);
        }
        op.actual_local_rank = rank;
        op.actual_tag = tag;
        op.buffer = buf;
        if class_send {
            op.desired_local_rank = rank;
            op.desired_tag = tag;
            op.desired_length = count;
            op.actual_length = count;
        } else if unexpected {
            // Remembered without buffer or count: the length is unknown.
            op.desired_local_rank = rank;
            op.desired_tag = tag;
            op.system_buffer = true;
        } else {
            op.desired_local_rank = if rank >= 0 { rank } else { -1 };
            op.tag_wild = tag < 0;
            op.desired_tag = if tag >= 0 { tag } else { -1 };
            op.desired_length = count;
        }
        let unit = LengthUnit::Elements { element_size: None };
        Ok((
            ctx,
            RawOp { op, unit },
            o.uint(dq.next, "MPIR_Debugq.next")?,
        ))
    }
}

/// A request's state from its completion counter (`cc`): non-zero is still pending.
fn status_of(cc: i64) -> OpStatus {
    if cc != 0 {
        OpStatus::Pending
    } else {
        OpStatus::Complete
    }
}

fn opt(o: &Obj, f: Option<mpir_types::FieldLayout>, what: &str) -> NativeResult<Option<i64>> {
    f.map(|f| o.int(f, what)).transpose()
}

/// The operations of `list` whose context id is `ctx`.
fn deal(list: &ListOps, ctx: u64) -> RawQueue {
    RawQueue {
        ops: list
            .0
            .iter()
            .filter(|(c, _)| *c == ctx)
            .map(|(_, op)| op.clone())
            .collect(),
        error: list.1.clone(),
        no_information: false,
    }
}
