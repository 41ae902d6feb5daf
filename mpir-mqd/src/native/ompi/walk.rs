//! The Open MPI walk: `ompi_mpi_communicators` (retried while the array changes), groups by
//! `ompi_proc_t` pointer identity with the world's, the PML request free lists (live
//! requests dealt out by communicator), and ob1's unexpected fragments per peer.

use std::collections::HashMap;

use mpir_target::{Symbol, Target};
use mpir_types::FieldLayout;
use mpir_types::mqd::{self, LengthUnit, OpStatus};

use super::{OmpiLayout, SYMBOLS};
use crate::error::native::{NativeError, NativeResult};
use crate::model::CommOrigin;
use crate::native::snapshot::{ListGuard, Obj, Snapshot};
use crate::native::{
    ProcessInfo, RawComm, RawOp, RawQueue, Walk, WalkOptions, WalkTally, blank_op, read_fresh,
    walk_until_stable,
};

/// At most this many bytes of a communicator name read through a pointer (Open MPI 5; its
/// `MPI_MAX_OBJECT_NAME` is 64).
const MAX_NAME: u64 = 256;
/// `OMPI_COMM_INTRINSIC`: `MPI_COMM_WORLD`, `MPI_COMM_SELF`, `MPI_COMM_NULL`.
const OMPI_COMM_INTRINSIC: u64 = 0x4;
/// `OMPI_GROUP_DENSE`: the group lists every `ompi_proc_t`.
const OMPI_GROUP_DENSE: u64 = 0x4;
/// `OMPI_REQUEST_INVALID` (`ompi_request_state_t`), `OMPI_REQUEST_PML`
/// (`ompi_request_type_t`), `MCA_PML_REQUEST_SEND`/`_RECV` (`mca_pml_base_request_type_t`).
const OMPI_REQUEST_INVALID: i64 = 0;
const OMPI_REQUEST_PML: i64 = 0;
const MCA_PML_REQUEST_SEND: i64 = 1;
const MCA_PML_REQUEST_RECV: i64 = 2;
/// `REQUEST_COMPLETED` in `ompi_request_t.req_complete` (0 is pending; anything else is a
/// waiting thread's sync object, also pending).
const REQUEST_COMPLETED: u64 = 1;
const MPI_ANY_TAG: i64 = -1;
/// ob1 header types (`MCA_BTL_TAG_PML` + 1, 2, 3).
const HDR_MATCH: u64 = 0x41;
const HDR_RNDV: u64 = 0x42;
const HDR_RGET: u64 = 0x43;

fn require(t: &dyn Target, name: &str) -> NativeResult<Symbol> {
    t.symbol(name)
        .map_err(|source| NativeError::Lookup {
            name: name.to_string(),
            source,
        })?
        .ok_or_else(|| NativeError::MissingLayout {
            walker: "Open MPI ob1",
            missing: vec![format!("symbol {name}")],
            missing_types: Vec::new(),
        })
}

struct CommRec {
    address: u64,
    contextid: u64,
    rank: i64,
    flags: u64,
    name: String,
    group: u64,
    pml_comm: u64,
}

struct Ctx<'a, 's> {
    l: &'a OmpiLayout,
    s: &'a Snapshot<'s>,
    o: &'a WalkOptions,
    hops: u64,
    missing: Vec<String>,
}

/// Walks the process behind `s`.
pub(crate) fn walk(
    l: &OmpiLayout,
    s: &Snapshot<'_>,
    _process: &ProcessInfo,
    o: &WalkOptions,
) -> NativeResult<Walk> {
    let t = s.target();
    let [array, sends, recvs] = SYMBOLS.map(|n| require(t, n));
    let (array, sends, recvs) = (array?, sends?, recvs?);
    let world = t
        .symbol("ompi_mpi_comm_world")
        .map_err(|source| NativeError::Lookup {
            name: "ompi_mpi_comm_world".into(),
            source,
        })?
        .map(|s| s.address);
    let mut cx = Ctx {
        l,
        s,
        o,
        hops: 0,
        missing: Vec::new(),
    };
    // The array's shape, read past the snapshot: a change means communicators came or went.
    let header = || -> NativeResult<[u64; 4]> {
        let b = read_fresh(s, array.address, l.array.span, "ompi_mpi_communicators")?;
        let v = mpir_types::View::new(s.model(), array.address, &b);
        let a = &l.array;
        let f = |f: FieldLayout| {
            v.field_uint(f, "ompi_mpi_communicators")
                .unwrap_or(u64::MAX)
        };
        Ok([f(a.size), f(a.lowest_free), f(a.number_free), f(a.addr)])
    };
    walk_until_stable(s, &mut cx, o.max_attempts, header, |cx| {
        cx.attempt(&array, world, sends.address, recvs.address)
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
        array: &Symbol,
        world: Option<u64>,
        sends: u64,
        recvs: u64,
    ) -> NativeResult<(Vec<RawComm>, Option<NativeError>)> {
        let (l, s) = (self.l, self.s);
        let a = s.obj(array.address, l.array.span, "ompi_mpi_communicators")?;
        let size = a.int(l.array.size, "ompi_mpi_communicators.size")?;
        let number_free = a.int(l.array.number_free, "ompi_mpi_communicators.number_free")?;
        let n = usize::try_from(size)
            .ok()
            .filter(|&n| n <= self.o.max_communicators)
            .ok_or_else(|| NativeError::Corrupt {
                what: "ompi_mpi_communicators.size".into(),
                address: array.address,
                reason: format!("{size} entries (bound {})", self.o.max_communicators),
            })?;
        let used = usize::try_from(size.saturating_sub(number_free)).unwrap_or(0);
        let table = a.uint(l.array.addr, "ompi_mpi_communicators.addr")?;
        let ptrs = if n == 0 {
            Vec::new()
        } else {
            s.pointers(table, n, "ompi_mpi_communicators.addr")?
        };
        let mut comms = Vec::new();
        let mut incomplete = None;
        for &p in ptrs.iter().filter(|&&p| p != 0).take(used) {
            self.hops += 1;
            match self.comm(p) {
                Ok(c) => comms.push(c),
                Err(e) => {
                    incomplete = Some(e);
                    break;
                }
            }
        }
        // World ranks: the index of each ompi_proc_t pointer in the world's group.
        let world = world.or_else(|| ptrs.first().copied().filter(|&p| p != 0));
        let world_procs: Option<HashMap<u64, i64>> = world
            .and_then(|w| comms.iter().find(|c| c.address == w))
            .and_then(|w| self.procs(w).ok().flatten())
            .map(|v| {
                v.into_iter()
                    .enumerate()
                    .map(|(i, p)| (p, i as i64))
                    .collect()
            });
        if world_procs.is_none() {
            self.missing
                .push("the world group (no global ranks)".into());
        }
        let send_ops = self.free_list(sends, "mca_pml_base_send_requests", true);
        let recv_ops = self.free_list(recvs, "mca_pml_base_recv_requests", false);
        let mut out = Vec::new();
        for c in comms {
            let group = match self.procs(&c) {
                Ok(Some(procs)) => world_procs.as_ref().map(|w| {
                    procs
                        .iter()
                        .map(|p| w.get(p).copied().unwrap_or(-1))
                        .collect::<Vec<_>>()
                }),
                Ok(None) => None,
                Err(e) => {
                    self.missing.push(format!("group of {:?}: {e}", c.name));
                    None
                }
            };
            let size = self.group_size(&c).unwrap_or(-1);
            let unexpected = self.unexpected(&c);
            let origin = if c.flags & OMPI_COMM_INTRINSIC != 0 {
                CommOrigin::Predefined
            } else {
                CommOrigin::User
            };
            out.push(RawComm {
                communicator: mqd::Communicator {
                    unique_id: c.contextid,
                    local_rank: c.rank,
                    size,
                    name: c.name.clone(),
                },
                origin,
                group,
                key: c.contextid,
                queues: [
                    deal(&send_ops, c.address),
                    deal(&recv_ops, c.address),
                    unexpected,
                ],
            });
        }
        Ok((out, incomplete))
    }

    fn comm(&self, at: u64) -> NativeResult<CommRec> {
        let c = &self.l.comm;
        let o = self.s.obj(at, c.span, "ompi_communicator_t")?;
        Ok(CommRec {
            address: at,
            contextid: o.uint(c.contextid, "ompi_communicator_t.c_contextid")?,
            rank: o.int(c.my_rank, "ompi_communicator_t.c_my_rank")?,
            flags: o.uint(c.flags, "ompi_communicator_t.c_flags")?,
            name: if c.name_is_pointer {
                match o.uint(c.name, "ompi_communicator_t.c_name")? {
                    0 => String::new(),
                    at => self
                        .s
                        .c_string(at, MAX_NAME, "ompi_communicator_t.c_name")?,
                }
            } else {
                o.text(c.name, "ompi_communicator_t.c_name")?
            },
            group: o.uint(c.local_group, "ompi_communicator_t.c_local_group")?,
            pml_comm: c
                .pml_comm
                .map(|f| o.uint(f, "ompi_communicator_t.c_pml_comm"))
                .transpose()?
                .unwrap_or(0),
        })
    }

    fn group_obj(&self, c: &CommRec) -> NativeResult<Option<Obj>> {
        if c.group == 0 {
            return Ok(None);
        }
        self.s
            .obj(c.group, self.l.group.span, "ompi_group_t")
            .map(Some)
    }

    fn group_size(&self, c: &CommRec) -> Option<i64> {
        let g = self.group_obj(c).ok()??;
        g.int(self.l.group.count, "ompi_group_t.grp_proc_count")
            .ok()
    }

    /// The `ompi_proc_t` pointers of `c`'s local group (dense groups only).
    fn procs(&self, c: &CommRec) -> NativeResult<Option<Vec<u64>>> {
        let gl = &self.l.group;
        let Some(g) = self.group_obj(c)? else {
            return Ok(None);
        };
        let count = g.int(gl.count, "ompi_group_t.grp_proc_count")?;
        let flags = g.uint(gl.flags, "ompi_group_t.grp_flags")?;
        if flags & OMPI_GROUP_DENSE == 0 {
            return Ok(None);
        }
        let n = usize::try_from(count)
            .ok()
            .filter(|&n| n <= self.o.max_group_size)
            .ok_or_else(|| NativeError::Corrupt {
                what: "ompi_group_t.grp_proc_count".into(),
                address: c.group,
                reason: format!("{count} members"),
            })?;
        if n == 0 {
            return Ok(Some(Vec::new()));
        }
        let table = g.uint(gl.procs, "ompi_group_t.grp_proc_pointers")?;
        self.s
            .pointers(table, n, "ompi_group_t.grp_proc_pointers")
            .map(Some)
    }

    /// The live PML requests of a request free list: (communicator, operation).
    fn free_list(&mut self, list: u64, what: &str, sends: bool) -> ListOps {
        let mut ops = Vec::new();
        match self.free_list_items(list, what) {
            Ok((items, error)) => {
                for item in items {
                    match self.request(item, sends) {
                        Ok(Some(op)) => ops.push(op),
                        Ok(None) => {}
                        Err(e) => return (ops, Some(e)),
                    }
                }
                (ops, error)
            }
            Err(e) => (ops, Some(e)),
        }
    }

    /// Addresses of every item of an `opal_free_list_t`, chunk by chunk (as Open MPI lays
    /// them out: after each allocation's `opal_free_list_item_t` header, aligned, every
    /// aligned `fl_frag_size` bytes; the first chunk may be smaller).
    fn free_list_items(
        &mut self,
        list: u64,
        what: &str,
    ) -> NativeResult<(Vec<u64>, Option<NativeError>)> {
        let f = &self.l.free_list;
        let o = self.s.obj(list, f.span, what)?;
        let frag = o.uint(f.frag_size, "opal_free_list_t.fl_frag_size")?;
        let align = o
            .uint(f.frag_alignment, "opal_free_list_t.fl_frag_alignment")?
            .max(1);
        let per = o.uint(f.num_per_alloc, "opal_free_list_t.fl_num_per_alloc")?;
        let total = o.uint(f.num_allocated, "opal_free_list_t.fl_num_allocated")?;
        let corrupt = |reason: String| NativeError::Corrupt {
            what: what.to_string(),
            address: list,
            reason,
        };
        if frag == 0 || frag > 1 << 20 || !align.is_power_of_two() || align > 1 << 20 {
            return Err(corrupt(format!("fragment size {frag}, alignment {align}")));
        }
        if total > self.o.max_operations as u64 {
            return Err(NativeError::TooLong {
                what: what.to_string(),
                limit: self.o.max_operations,
            });
        }
        let stride = frag.next_multiple_of(align);
        let initial = if total <= per || per == 0 {
            total
        } else {
            match total % per {
                0 => per,
                r => r,
            }
        };
        let sentinel = list.wrapping_add(f.sentinel);
        let next_of = |item: u64| -> NativeResult<u64> {
            let n = self.l.list_next;
            let o = self.s.obj(item, n.end().unwrap_or(0), "opal_list_item_t")?;
            o.uint(n, "opal_list_item_t.opal_list_next")
        };
        let mut guard = ListGuard::new(format!("{what}.fl_allocations"), self.o.max_operations);
        let mut items = Vec::new();
        let mut chunk = next_of(sentinel)?;
        let mut first = true;
        while chunk != sentinel && chunk != 0 {
            if let Err(e) = guard.admit(chunk) {
                self.hops += guard.hops() as u64;
                return Ok((items, Some(e)));
            }
            let n = if first { initial } else { per };
            first = false;
            let start = chunk
                .checked_add(f.item_size)
                .map(|a| a.next_multiple_of(align))
                .ok_or_else(|| corrupt(format!("allocation at {chunk:#x}")))?;
            for i in 0..n {
                if items.len() as u64 >= total {
                    break;
                }
                items.push(start.wrapping_add(i * stride));
            }
            chunk = match next_of(chunk) {
                Ok(c) => c,
                Err(e) => return Ok((items, Some(e))),
            };
        }
        self.hops += (guard.hops() + items.len()) as u64;
        Ok((items, None))
    }

    /// The request at `at` as an operation, when it is a live user PML request.
    fn request(&self, at: u64, sends: bool) -> NativeResult<Option<(u64, RawOp)>> {
        let r = &self.l.req;
        let span = if sends { r.send_span } else { r.recv_span };
        let o = self.s.obj(at, span, "PML request")?;
        if o.int(r.state, "ompi_request_t.req_state")? == OMPI_REQUEST_INVALID
            || o.int(r.ompi_type, "ompi_request_t.req_type")? != OMPI_REQUEST_PML
        {
            return Ok(None);
        }
        let comm = o.uint(r.comm, "mca_pml_base_request_t.req_comm")?;
        let tag = o.int(r.tag, "mca_pml_base_request_t.req_tag")?;
        if tag < 0 && tag != MPI_ANY_TAG {
            return Ok(None); // the library's own (collectives), as Open MPI's DLL hides them
        }
        let pml_type = o.int(r.pml_type, "mca_pml_base_request_t.req_type")?;
        let mut op = blank_op();
        op.tag_wild = tag == MPI_ANY_TAG;
        op.desired_tag = tag;
        let complete = o.uint(r.complete, "ompi_request_t.req_complete")?;
        op.status = if complete == REQUEST_COMPLETED {
            OpStatus::Complete
        } else {
            OpStatus::Pending
        };
        op.desired_local_rank = o.int(r.peer, "mca_pml_base_request_t.req_peer")?;
        op.buffer = o.uint(r.addr, "mca_pml_base_request_t.req_addr")?;
        let dt = o.uint(r.datatype, "mca_pml_base_request_t.req_datatype")?;
        let count = o.uint(r.count, "mca_pml_base_request_t.req_count")?;
        let (dt_size, dt_name) = self.datatype(dt)?;
        op.desired_length = i64::try_from(dt_size.saturating_mul(count)).unwrap_or(-1);
        let mut text = vec![
            String::new(),
            format!("Data: {count} instances of MPI datatype"),
            dt_name,
        ];
        if pml_type == MCA_PML_REQUEST_SEND {
            text[0] = format!("Send: {at:#x}");
            let addr = o.uint(r.send_addr, "mca_pml_base_send_request_t.req_addr")?;
            op.system_buffer = addr != op.buffer;
            op.actual_length = o.int(r.send_bytes_packed, "req_bytes_packed")?;
            op.actual_tag = tag;
            op.actual_local_rank = op.desired_local_rank;
        } else if pml_type == MCA_PML_REQUEST_RECV {
            text[0] = format!("Receive: {at:#x}");
            op.actual_tag = o.int(r.status_tag, "ompi_status_public_t.MPI_TAG")?;
            if op.actual_tag != MPI_ANY_TAG {
                op.status = OpStatus::Matched;
                op.desired_length = o.int(r.recv_bytes_packed, "req_bytes_packed")?;
                op.actual_local_rank = o.int(r.status_source, "ompi_status_public_t.MPI_SOURCE")?;
            }
        } else {
            text[0] = format!("Unknown type of request {at:#x}");
        }
        if o.int(r.pml_complete, "mca_pml_base_request_t.req_pml_complete")? != 0 {
            text[1] = "Data transfer completed".into();
        }
        if op.status != OpStatus::Pending && pml_type != MCA_PML_REQUEST_SEND {
            op.actual_length = o.int(r.status_ucount, "ompi_status_public_t._ucount")?;
            op.actual_tag = o.int(r.status_tag, "ompi_status_public_t.MPI_TAG")?;
            op.actual_local_rank = o.int(r.status_source, "ompi_status_public_t.MPI_SOURCE")?;
        }
        text.retain(|t| !t.is_empty());
        op.extra_text = text;
        Ok(Some((
            comm,
            RawOp {
                op,
                unit: LengthUnit::Bytes,
            },
        )))
    }

    fn datatype(&self, dt: u64) -> NativeResult<(u64, String)> {
        let d = &self.l.datatype;
        let o = self.s.obj(dt, d.span, "ompi_datatype_t")?;
        Ok((
            o.uint(d.size, "opal_datatype_t.size")?,
            o.text(d.name, "ompi_datatype_t.name")?,
        ))
    }

    /// ob1's unexpected fragments of `c`, peer by peer.
    fn unexpected(&mut self, c: &CommRec) -> RawQueue {
        let Some(u) = self.l.ob1.clone() else {
            return RawQueue::none();
        };
        let mut q = RawQueue {
            ops: Vec::new(),
            error: None,
            no_information: false,
        };
        if c.pml_comm == 0 {
            return q;
        }
        let procs = (|| -> NativeResult<Vec<u64>> {
            let o = self.s.obj(c.pml_comm, u.comm_span, "mca_pml_ob1_comm_t")?;
            let n = o.uint(u.num_procs, "mca_pml_ob1_comm_t.num_procs")?;
            if n > self.o.max_group_size as u64 {
                return Err(NativeError::Corrupt {
                    what: "mca_pml_ob1_comm_t.num_procs".into(),
                    address: c.pml_comm,
                    reason: format!("{n} peers"),
                });
            }
            let table = o.uint(u.procs, "mca_pml_ob1_comm_t.procs")?;
            if n == 0 || table == 0 {
                return Ok(Vec::new());
            }
            self.s
                .pointers(table, n as usize, "mca_pml_ob1_comm_t.procs")
        })();
        let procs = match procs {
            Ok(p) => p,
            Err(e) => {
                q.error = Some(e);
                return q;
            }
        };
        let mut guard = ListGuard::new("ob1 unexpected fragments", self.o.max_operations);
        for proc_ in procs.into_iter().filter(|&p| p != 0) {
            let sentinel = proc_.wrapping_add(u.unexpected_sentinel);
            let mut at = match self.next(sentinel) {
                Ok(a) => a,
                Err(e) => {
                    q.error = Some(e);
                    break;
                }
            };
            while at != sentinel && at != 0 {
                if let Err(e) = guard.admit(at) {
                    q.error = Some(e);
                    break;
                }
                match self.fragment(at, &u, c.contextid) {
                    Ok(op) => q.ops.extend(op),
                    Err(e) => {
                        q.error = Some(e);
                        break;
                    }
                }
                at = match self.next(at) {
                    Ok(a) => a,
                    Err(e) => {
                        q.error = Some(e);
                        break;
                    }
                };
            }
            if q.error.is_some() {
                break;
            }
        }
        self.hops += guard.hops() as u64;
        q
    }

    fn next(&self, item: u64) -> NativeResult<u64> {
        let n = self.l.list_next;
        let o = self.s.obj(item, n.end().unwrap_or(0), "opal_list_item_t")?;
        o.uint(n, "opal_list_item_t.opal_list_next")
    }

    fn fragment(
        &self,
        at: u64,
        u: &super::Ob1Layout,
        contextid: u64,
    ) -> NativeResult<Option<RawOp>> {
        let o = self.s.obj(at, u.frag_span, "mca_pml_ob1_recv_frag_t")?;
        let kind = o.uint(u.hdr_type, "mca_pml_ob1_common_hdr_t.hdr_type")?;
        let ctx = o.uint(u.hdr_ctx, "mca_pml_ob1_match_hdr_t.hdr_ctx")?;
        let width_mask = u64::MAX >> (64 - 8 * u.hdr_ctx.size.clamp(1, 8));
        if ctx != contextid & width_mask {
            return Err(NativeError::Corrupt {
                what: "mca_pml_ob1_match_hdr_t.hdr_ctx".into(),
                address: at,
                reason: format!("context {ctx} on the queue of communicator {contextid}"),
            });
        }
        let src = o.int(u.hdr_src, "mca_pml_ob1_match_hdr_t.hdr_src")?;
        let tag = o.int(u.hdr_tag, "mca_pml_ob1_match_hdr_t.hdr_tag")?;
        if tag < 0 {
            return Ok(None); // the library's own (collectives)
        }
        let mut op = blank_op();
        op.desired_local_rank = src;
        op.actual_local_rank = src;
        op.desired_tag = tag;
        op.actual_tag = tag;
        op.system_buffer = true;
        let (length, text) = match kind {
            HDR_RNDV | HDR_RGET => (
                o.int(u.msg_length, "mca_pml_ob1_rendezvous_hdr_t.hdr_msg_length")?,
                "Unexpected rendezvous request (data still at the sender)",
            ),
            HDR_MATCH => {
                let n = o.uint(u.num_segments, "mca_pml_ob1_recv_frag_t.num_segments")?;
                let max = u.segments.size / u.seg_stride.max(1);
                if n == 0 || n > max {
                    return Err(NativeError::Corrupt {
                        what: "mca_pml_ob1_recv_frag_t.num_segments".into(),
                        address: at,
                        reason: format!("{n} segments (at most {max})"),
                    });
                }
                let seg = |i: u64, f: FieldLayout| {
                    FieldLayout::new(u.segments.offset + i * u.seg_stride + f.offset, f.size)
                };
                let mut bytes = 0u64;
                for i in 0..n {
                    bytes = bytes.saturating_add(o.uint(seg(i, u.seg_len), "seg_len")?);
                }
                let first = o.uint(seg(0, u.seg_addr), "seg_addr")?;
                op.buffer = first.wrapping_add(u.match_hdr_size);
                (
                    i64::try_from(bytes.saturating_sub(u.match_hdr_size)).unwrap_or(-1),
                    "Unexpected eager message",
                )
            }
            _ => (-1, "Unexpected fragment of unknown type"),
        };
        op.desired_length = length;
        op.actual_length = length;
        op.extra_text = vec![text.into()];
        Ok(Some(RawOp {
            op,
            unit: LengthUnit::Bytes,
        }))
    }
}

/// Requests of one free list: (communicator address, operation), and what cut it short.
type ListOps = (Vec<(u64, RawOp)>, Option<NativeError>);

fn deal(list: &ListOps, comm: u64) -> RawQueue {
    RawQueue {
        ops: list
            .0
            .iter()
            .filter(|(c, _)| *c == comm)
            .map(|(_, op)| op.clone())
            .collect(),
        error: list.1.clone(),
        no_information: false,
    }
}
