//! MPICH: the layouts the walker needs (see the module docs of [`crate::native`] for the
//! list), found by name in the process's debug information.

use mpir_target::Target;
use mpir_types::{FieldLayout, TypeLayout};

use crate::error::native::NativeResult;
use crate::native::Detected;
use crate::native::WalkerKind;
use crate::native::layout::{INT_WIDTHS, Lookup, nested, span};

mod walk;

pub(crate) use walk::walk;

/// `MPIR_Comm_list`.
#[derive(Debug, Clone)]
pub(crate) struct ListLayout {
    pub(crate) size: u64,
    pub(crate) seq: FieldLayout,
    pub(crate) head: FieldLayout,
}

/// `MPIR_Comm`.
#[derive(Debug, Clone)]
pub(crate) struct CommLayout {
    pub(crate) span: u64,
    pub(crate) next: FieldLayout,
    pub(crate) name: FieldLayout,
    pub(crate) rank: FieldLayout,
    pub(crate) local_size: FieldLayout,
    pub(crate) context_id: FieldLayout,
    pub(crate) recvcontext_id: FieldLayout,
    pub(crate) handle: Option<FieldLayout>,
    pub(crate) kind: Option<FieldLayout>,
    pub(crate) hierarchy: Option<FieldLayout>,
    pub(crate) local_group: Option<FieldLayout>,
    /// `dev.vcrt` (ch3).
    pub(crate) vcrt: Option<FieldLayout>,
}

/// `MPIR_Group` and `MPII_Group_pmap_t`.
#[derive(Debug, Clone)]
pub(crate) struct GroupLayout {
    pub(crate) span: u64,
    pub(crate) size: FieldLayout,
    pub(crate) pmap: FieldLayout,
    pub(crate) pmap_size: u64,
    pub(crate) lpid: FieldLayout,
}

/// `MPIDI_VCRT`.
#[derive(Debug, Clone)]
pub(crate) struct VcrtLayout {
    pub(crate) size: FieldLayout,
    pub(crate) table: FieldLayout,
}

/// `MPIR_Process` (`comm_world`, `icomm_world`).
#[derive(Debug, Clone)]
pub(crate) struct ProcessLayout {
    pub(crate) comm_world: FieldLayout,
    pub(crate) icomm_world: Option<FieldLayout>,
}

/// `MPIR_Datatype` and the direct array.
#[derive(Debug, Clone)]
pub(crate) struct DatatypeLayout {
    pub(crate) stride: u64,
    pub(crate) size: FieldLayout,
}

/// The ch3 request fields (offsets from the request's start).
#[derive(Debug, Clone)]
pub(crate) struct RequestLayout {
    pub(crate) span: u64,
    pub(crate) cc: FieldLayout,
    pub(crate) next: FieldLayout,
    pub(crate) tag: FieldLayout,
    pub(crate) rank: FieldLayout,
    pub(crate) context_id: FieldLayout,
    pub(crate) user_buf: FieldLayout,
    pub(crate) user_count: FieldLayout,
    pub(crate) datatype: FieldLayout,
    pub(crate) recv_data_sz: Option<FieldLayout>,
    pub(crate) tmpbuf: Option<FieldLayout>,
}

/// `MPIR_Sendq`.
#[derive(Debug, Clone)]
pub(crate) struct SendqLayout {
    pub(crate) span: u64,
    pub(crate) sreq: FieldLayout,
    pub(crate) tag: FieldLayout,
    pub(crate) rank: FieldLayout,
    pub(crate) context_id: FieldLayout,
    pub(crate) next: FieldLayout,
}

/// `MPIR_Debugq`.
#[derive(Debug, Clone)]
pub(crate) struct DebugqLayout {
    pub(crate) span: u64,
    pub(crate) req: FieldLayout,
    pub(crate) tag: FieldLayout,
    pub(crate) rank: FieldLayout,
    pub(crate) context_id: FieldLayout,
    pub(crate) buf: FieldLayout,
    pub(crate) count: FieldLayout,
    pub(crate) next: FieldLayout,
}

/// Where the queues are.
#[derive(Debug, Clone)]
pub(crate) enum Queues {
    Ch3 {
        req: RequestLayout,
        sendq: Option<SendqLayout>,
    },
    Debugq {
        dq: DebugqLayout,
        /// `MPIR_Request.cc`.
        cc: Option<FieldLayout>,
    },
}

/// Everything the MPICH walker reads.
#[derive(Debug, Clone)]
pub(crate) struct MpichLayout {
    pub(crate) list: ListLayout,
    pub(crate) comm: CommLayout,
    pub(crate) group: Option<GroupLayout>,
    pub(crate) vcrt: Option<VcrtLayout>,
    pub(crate) process: Option<ProcessLayout>,
    pub(crate) datatype: Option<DatatypeLayout>,
    pub(crate) queues: Queues,
}

impl MpichLayout {
    pub(crate) fn kind(&self) -> WalkerKind {
        match self.queues {
            Queues::Ch3 { .. } => WalkerKind::MpichCh3,
            Queues::Debugq { .. } => WalkerKind::MpichDebugq,
        }
    }
}

const ANCHOR: &str = "MPIR_All_communicators";

/// The MPICH layout of `target`: `Ok(Ok((layout, optional items missing)))`, or
/// `Ok(Err(required items missing))`.
pub(crate) fn detect(target: &dyn Target) -> NativeResult<Detected<MpichLayout>> {
    let mut l = Lookup::new(target, Some(ANCHOR));
    if l.symbol(ANCHOR, true)?.is_none() {
        return Ok(Err(l.lacks()));
    }
    let list = l.ty("MPIR_Comm_list")?.and_then(|t| {
        Some(ListLayout {
            size: t.byte_size,
            seq: l.field(&t, "sequence_number", INT_WIDTHS)?,
            head: l.field(&t, "head", &[target.data_model().pointer_size()])?,
        })
    });
    let comm = l.ty("MPIR_Comm")?;
    let comm = comm.as_ref().and_then(|t| comm_layout(&mut l, t));
    let queues = queues(&mut l)?;
    let (Some(list), Some(mut comm), Some(queues)) = (list, comm, queues) else {
        return Ok(Err(l.lacks()));
    };
    // Optional parts: what is missing from here on only enriches the result.
    let required = l.missing.len();
    let group = group_layout(&mut l)?;
    let vcrt = vcrt_layout(&mut l, &mut comm)?;
    let process = process_layout(&mut l)?;
    let datatype = datatype_layout(&mut l)?;
    let optional = l.missing.split_off(required);
    Ok(Ok((
        MpichLayout {
            list,
            comm,
            group,
            vcrt,
            process,
            datatype,
            queues,
        },
        optional,
    )))
}

fn comm_layout(l: &mut Lookup<'_>, t: &TypeLayout) -> Option<CommLayout> {
    let p = l.pointer_size();
    let next = l.field(t, "comm_next", &[p]);
    let name = l.field(t, "name", &[]);
    let rank = l.field(t, "rank", INT_WIDTHS);
    let local_size = l.field(t, "local_size", INT_WIDTHS);
    let context_id = l.field(t, "context_id", INT_WIDTHS);
    let recvcontext_id = l.field(t, "recvcontext_id", INT_WIDTHS);
    let (next, name, rank, local_size, context_id, recvcontext_id) = (
        next?,
        name?,
        rank?,
        local_size?,
        context_id?,
        recvcontext_id?,
    );
    let opt = |m: &str| crate::native::layout::try_field(t, m, INT_WIDTHS).ok();
    let local_group = crate::native::layout::try_field(t, "local_group", &[p]).ok();
    Some(CommLayout {
        span: t.byte_size,
        next,
        name,
        rank,
        local_size,
        context_id,
        recvcontext_id,
        handle: opt("handle"),
        kind: opt("comm_kind"),
        hierarchy: opt("hierarchy_kind"),
        local_group,
        vcrt: None,
    })
}

fn group_layout(l: &mut Lookup<'_>) -> NativeResult<Option<GroupLayout>> {
    let p = l.pointer_size();
    let Some(g) = l.ty("MPIR_Group")? else {
        return Ok(None);
    };
    let Some(m) = l.ty("MPII_Group_pmap_t")? else {
        return Ok(None);
    };
    let size = l.field(&g, "size", INT_WIDTHS);
    let pmap = l.field(&g, "lrank_to_lpid", &[p]);
    let lpid = l.field(&m, "lpid", INT_WIDTHS);
    Ok(match (size, pmap, lpid) {
        (Some(size), Some(pmap), Some(lpid)) => Some(GroupLayout {
            span: g.byte_size,
            size,
            pmap,
            pmap_size: m.byte_size.max(lpid.size),
            lpid,
        }),
        _ => None,
    })
}

fn vcrt_layout(l: &mut Lookup<'_>, comm: &mut CommLayout) -> NativeResult<Option<VcrtLayout>> {
    let p = l.pointer_size();
    // ch3 only: other devices have no `dev.vcrt`; say nothing about their absence.
    let Some(c) = l.try_type("MPIR_Comm")? else {
        return Ok(None);
    };
    let Ok(dev) = crate::native::layout::try_field(&c, "dev", &[]) else {
        return Ok(None);
    };
    let Some(d) = l.try_type("MPIDI_CH3I_comm_t")? else {
        return Ok(None);
    };
    let Some(v) = l.ty("MPIDI_VCRT")? else {
        return Ok(None);
    };
    let vcrt = l.field(&d, "vcrt", &[p]);
    let size = l.field(&v, "size", INT_WIDTHS);
    let table = l.field(&v, "vcr_table", &[]);
    let (Some(vcrt), Some(size), Some(table)) = (vcrt, size, table) else {
        return Ok(None);
    };
    comm.vcrt = Some(nested(dev, vcrt));
    Ok(Some(VcrtLayout { size, table }))
}

fn process_layout(l: &mut Lookup<'_>) -> NativeResult<Option<ProcessLayout>> {
    let p = l.pointer_size();
    if l.symbol("MPIR_Process", true)?.is_none() {
        return Ok(None);
    }
    let Some(t) = l.ty("MPIR_Process_t")? else {
        return Ok(None);
    };
    let Some(comm_world) = l.field(&t, "comm_world", &[p]) else {
        return Ok(None);
    };
    let icomm_world = l.field(&t, "icomm_world", &[p]);
    Ok(Some(ProcessLayout {
        comm_world,
        icomm_world,
    }))
}

fn datatype_layout(l: &mut Lookup<'_>) -> NativeResult<Option<DatatypeLayout>> {
    if l.symbol("MPIR_Datatype_direct", true)?.is_none() {
        return Ok(None);
    }
    let Some(t) = l.ty("MPIR_Datatype")? else {
        return Ok(None);
    };
    Ok(l.field(&t, "size", INT_WIDTHS).map(|size| DatatypeLayout {
        stride: t.byte_size,
        size,
    }))
}

/// The queue layout: MPICH ≥ 4.1's debug queues when `MPIR_Recvq_head` exists (then
/// `MPIR_Debugq` is required: without it the MPI keeps those queues but lacks their type, which a
/// types sidecar can give), else ch3's.
fn queues(l: &mut Lookup<'_>) -> NativeResult<Option<Queues>> {
    let p = l.pointer_size();
    if l.symbol("MPIR_Recvq_head", false)?.is_some() {
        let Some(dq) = l.ty("MPIR_Debugq")? else {
            return Ok(None);
        };
        for s in ["MPIR_Sendq_head", "MPIR_Unexpq_head"] {
            l.symbol(s, true)?;
        }
        let req = l.field(&dq, "req", &[p]);
        let tag = l.field(&dq, "tag", INT_WIDTHS);
        let rank = l.field(&dq, "rank", INT_WIDTHS);
        let context_id = l.field(&dq, "context_id", INT_WIDTHS);
        let buf = l.field(&dq, "buf", &[p]);
        let count = l.field(&dq, "count", INT_WIDTHS);
        let next = l.field(&dq, "next", &[p]);
        let cc = l
            .try_type("MPIR_Request")?
            .and_then(|r| crate::native::layout::try_field(&r, "cc", INT_WIDTHS).ok());
        let (
            Some(req),
            Some(tag),
            Some(rank),
            Some(context_id),
            Some(buf),
            Some(count),
            Some(next),
        ) = (req, tag, rank, context_id, buf, count, next)
        else {
            return Ok(None);
        };
        let span = span(&[
            Some(req),
            Some(tag),
            Some(rank),
            Some(context_id),
            Some(buf),
            Some(count),
            Some(next),
        ]);
        return Ok(Some(Queues::Debugq {
            dq: DebugqLayout {
                span,
                req,
                tag,
                rank,
                context_id,
                buf,
                count,
                next,
            },
            cc,
        }));
    }
    l.symbol("MPID_Recvq_posted_head_ptr", true)?;
    l.symbol("MPID_Recvq_unexpected_head_ptr", true)?;
    let req = ch3_request(l)?;
    let sendq = match l.try_type("MPIR_Sendq")? {
        Some(t) if l.symbol("MPIR_Sendq_head", false)?.is_some() => {
            let sreq = l.field(&t, "sreq", &[p]);
            let tag = l.field(&t, "tag", INT_WIDTHS);
            let rank = l.field(&t, "rank", INT_WIDTHS);
            let context_id = l.field(&t, "context_id", INT_WIDTHS);
            let next = l.field(&t, "next", &[p]);
            match (sreq, tag, rank, context_id, next) {
                (Some(sreq), Some(tag), Some(rank), Some(context_id), Some(next)) => {
                    Some(SendqLayout {
                        span: span(&[
                            Some(sreq),
                            Some(tag),
                            Some(rank),
                            Some(context_id),
                            Some(next),
                        ]),
                        sreq,
                        tag,
                        rank,
                        context_id,
                        next,
                    })
                }
                _ => None,
            }
        }
        _ => None,
    };
    Ok(req.map(|req| Queues::Ch3 { req, sendq }))
}

fn ch3_request(l: &mut Lookup<'_>) -> NativeResult<Option<RequestLayout>> {
    let p = l.pointer_size();
    let r = l.ty("MPIR_Request")?;
    let d = l.ty("MPIDI_Request")?;
    let m = l.ty("MPIDI_Message_match")?;
    let parts = l.ty("MPIDI_Message_match_parts_t")?;
    let (Some(r), Some(d), Some(m), Some(parts)) = (r, d, m, parts) else {
        return Ok(None);
    };
    let cc = l.field(&r, "cc", INT_WIDTHS);
    let next = l.field(&r, "next", &[p]);
    let dev = l.field(&r, "dev", &[]);
    let matchf = l.field(&d, "match", &[]);
    let user_buf = l.field(&d, "user_buf", &[p]);
    let user_count = l.field(&d, "user_count", INT_WIDTHS);
    let datatype = l.field(&d, "datatype", INT_WIDTHS);
    let partsf = l.field(&m, "parts", &[]);
    let tag = l.field(&parts, "tag", INT_WIDTHS);
    let rank = l.field(&parts, "rank", INT_WIDTHS);
    let context_id = l.field(&parts, "context_id", INT_WIDTHS);
    let recv_data_sz = crate::native::layout::try_field(&d, "recv_data_sz", INT_WIDTHS).ok();
    let tmpbuf = crate::native::layout::try_field(&d, "tmpbuf", &[p]).ok();
    let (
        Some(cc),
        Some(next),
        Some(dev),
        Some(matchf),
        Some(user_buf),
        Some(user_count),
        Some(datatype),
        Some(partsf),
        Some(tag),
        Some(rank),
        Some(context_id),
    ) = (
        cc, next, dev, matchf, user_buf, user_count, datatype, partsf, tag, rank, context_id,
    )
    else {
        return Ok(None);
    };
    let in_match = |f| nested(dev, nested(matchf, nested(partsf, f)));
    let in_dev = |f| nested(dev, f);
    let mut req = RequestLayout {
        span: 0,
        cc,
        next,
        tag: in_match(tag),
        rank: in_match(rank),
        context_id: in_match(context_id),
        user_buf: in_dev(user_buf),
        user_count: in_dev(user_count),
        datatype: in_dev(datatype),
        recv_data_sz: recv_data_sz.map(in_dev),
        tmpbuf: tmpbuf.map(in_dev),
    };
    req.span = span(&[
        Some(req.cc),
        Some(req.next),
        Some(req.tag),
        Some(req.rank),
        Some(req.context_id),
        Some(req.user_buf),
        Some(req.user_count),
        Some(req.datatype),
        req.recv_data_sz,
        req.tmpbuf,
    ]);
    Ok(Some(req))
}
