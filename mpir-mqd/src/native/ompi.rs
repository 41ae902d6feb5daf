//! Open MPI with the PML ob1: the layouts the walker needs (see the module docs of
//! [`crate::native`] for the list), found by name in the debug information or types sidecar.

use mpir_target::Target;
use mpir_types::{FieldLayout, TypeLayout};

use crate::error::native::NativeResult;
use crate::native::Detected;
use crate::native::layout::{INT_WIDTHS, Lookup, nested, span, try_field};

mod walk;

pub(crate) use walk::walk;

/// `opal_pointer_array_t`.
#[derive(Debug, Clone)]
pub(crate) struct PtrArrayLayout {
    pub(crate) span: u64,
    pub(crate) lowest_free: FieldLayout,
    pub(crate) number_free: FieldLayout,
    pub(crate) size: FieldLayout,
    pub(crate) addr: FieldLayout,
}

/// `opal_free_list_t` (with its `fl_allocations` list's sentinel).
#[derive(Debug, Clone)]
pub(crate) struct FreeListLayout {
    pub(crate) span: u64,
    /// Offset of `fl_allocations.opal_list_sentinel`.
    pub(crate) sentinel: u64,
    pub(crate) frag_size: FieldLayout,
    pub(crate) frag_alignment: FieldLayout,
    pub(crate) num_per_alloc: FieldLayout,
    pub(crate) num_allocated: FieldLayout,
    /// `sizeof(opal_free_list_item_t)`.
    pub(crate) item_size: u64,
}

/// `ompi_communicator_t`.
#[derive(Debug, Clone)]
pub(crate) struct CommLayout {
    pub(crate) span: u64,
    /// `c_name`: a `char` array (Open MPI ≤ 4) or a `char *` (5, when the types say so).
    pub(crate) name: FieldLayout,
    pub(crate) name_is_pointer: bool,
    /// The id ob1 puts in its match headers: `c_contextid` (Open MPI ≤ 4) or `c_index` (5).
    pub(crate) contextid: FieldLayout,
    pub(crate) my_rank: FieldLayout,
    pub(crate) local_group: FieldLayout,
    pub(crate) flags: FieldLayout,
    pub(crate) pml_comm: Option<FieldLayout>,
}

/// `ompi_group_t`.
#[derive(Debug, Clone)]
pub(crate) struct GroupLayout {
    pub(crate) span: u64,
    pub(crate) count: FieldLayout,
    pub(crate) procs: FieldLayout,
    pub(crate) flags: FieldLayout,
}

/// Request fields, as offsets from the start of a send or receive request.
#[derive(Debug, Clone)]
pub(crate) struct RequestLayout {
    pub(crate) send_span: u64,
    pub(crate) recv_span: u64,
    pub(crate) state: FieldLayout,
    pub(crate) ompi_type: FieldLayout,
    pub(crate) complete: FieldLayout,
    pub(crate) status_source: FieldLayout,
    pub(crate) status_tag: FieldLayout,
    pub(crate) status_ucount: FieldLayout,
    pub(crate) pml_complete: FieldLayout,
    pub(crate) pml_type: FieldLayout,
    pub(crate) comm: FieldLayout,
    pub(crate) datatype: FieldLayout,
    pub(crate) addr: FieldLayout,
    pub(crate) count: FieldLayout,
    pub(crate) peer: FieldLayout,
    pub(crate) tag: FieldLayout,
    pub(crate) send_addr: FieldLayout,
    pub(crate) send_bytes_packed: FieldLayout,
    pub(crate) recv_bytes_packed: FieldLayout,
}

/// `ompi_datatype_t` (`super.size`, `name`).
#[derive(Debug, Clone)]
pub(crate) struct DatatypeLayout {
    pub(crate) span: u64,
    pub(crate) size: FieldLayout,
    pub(crate) name: FieldLayout,
}

/// The PML ob1's matching structures (unexpected fragments).
#[derive(Debug, Clone)]
pub(crate) struct Ob1Layout {
    pub(crate) comm_span: u64,
    pub(crate) procs: FieldLayout,
    pub(crate) num_procs: FieldLayout,
    /// Offset of `unexpected_frags.opal_list_sentinel` in `mca_pml_ob1_comm_proc_t`.
    pub(crate) unexpected_sentinel: u64,
    pub(crate) frag_span: u64,
    pub(crate) hdr_type: FieldLayout,
    pub(crate) hdr_ctx: FieldLayout,
    pub(crate) hdr_src: FieldLayout,
    pub(crate) hdr_tag: FieldLayout,
    pub(crate) msg_length: FieldLayout,
    pub(crate) num_segments: FieldLayout,
    pub(crate) segments: FieldLayout,
    pub(crate) seg_stride: u64,
    pub(crate) seg_addr: FieldLayout,
    pub(crate) seg_len: FieldLayout,
    pub(crate) match_hdr_size: u64,
}

/// Everything the Open MPI walker reads.
#[derive(Debug, Clone)]
pub(crate) struct OmpiLayout {
    pub(crate) array: PtrArrayLayout,
    pub(crate) free_list: FreeListLayout,
    /// `opal_list_item_t.opal_list_next`.
    pub(crate) list_next: FieldLayout,
    pub(crate) comm: CommLayout,
    pub(crate) group: GroupLayout,
    pub(crate) req: RequestLayout,
    pub(crate) datatype: DatatypeLayout,
    pub(crate) ob1: Option<Ob1Layout>,
}

const ANCHOR: &str = "ompi_mpi_communicators";

/// Symbols the walker needs.
pub(crate) const SYMBOLS: [&str; 3] = [
    "ompi_mpi_communicators",
    "mca_pml_base_send_requests",
    "mca_pml_base_recv_requests",
];

/// The Open MPI layout of `target`.
pub(crate) fn detect(target: &dyn Target) -> NativeResult<Detected<OmpiLayout>> {
    let mut l = Lookup::new(target, Some(ANCHOR));
    if l.symbol(ANCHOR, true)?.is_none() {
        return Ok(Err(l.lacks()));
    }
    for s in &SYMBOLS[1..] {
        l.symbol(s, true)?;
    }
    let p = l.pointer_size();
    let array = l.ty("opal_pointer_array_t")?.and_then(|t| {
        Some(PtrArrayLayout {
            span: t.byte_size,
            lowest_free: l.field(&t, "lowest_free", INT_WIDTHS)?,
            number_free: l.field(&t, "number_free", INT_WIDTHS)?,
            size: l.field(&t, "size", INT_WIDTHS)?,
            addr: l.field(&t, "addr", &[p])?,
        })
    });
    let list = l.ty("opal_list_t")?;
    let item = l.ty("opal_list_item_t")?;
    let fl_item = l.ty("opal_free_list_item_t")?;
    let sentinel = list
        .as_ref()
        .and_then(|t| l.field(t, "opal_list_sentinel", &[]));
    let list_next = item
        .as_ref()
        .and_then(|t| l.field(t, "opal_list_next", &[p]));
    let free_list = match (l.ty("opal_free_list_t")?, sentinel, &fl_item) {
        (Some(t), Some(sentinel), Some(fl_item)) => (|| {
            let allocations = l.field(&t, "fl_allocations", &[])?;
            Some(FreeListLayout {
                span: t.byte_size,
                sentinel: allocations.offset + sentinel.offset,
                frag_size: l.field(&t, "fl_frag_size", INT_WIDTHS)?,
                frag_alignment: l.field(&t, "fl_frag_alignment", INT_WIDTHS)?,
                num_per_alloc: l.field(&t, "fl_num_per_alloc", INT_WIDTHS)?,
                num_allocated: l.field(&t, "fl_num_allocated", INT_WIDTHS)?,
                item_size: fl_item.byte_size,
            })
        })(),
        _ => None,
    };
    let comm = l.ty("ompi_communicator_t")?.and_then(|t| {
        let name_is_pointer = t
            .member("c_name")
            .is_some_and(|m| m.kind == mpir_types::MemberKind::Pointer);
        let pointer = [p];
        let name_sizes: &[u64] = if name_is_pointer { &pointer } else { &[] };
        Some(CommLayout {
            span: t.byte_size,
            name_is_pointer,
            name: l.field(&t, "c_name", name_sizes)?,
            // Open MPI ≤ 4: the integer c_contextid, which ob1 sends as hdr_ctx. Open MPI 5:
            // c_contextid is an extended id (a structure) and ob1 sends the communicator's
            // index, c_index, instead.
            contextid: match try_field(&t, "c_contextid", INT_WIDTHS) {
                Ok(f) => f,
                Err(_) if t.member("c_index").is_some() => l.field(&t, "c_index", INT_WIDTHS)?,
                Err(_) => l.field(&t, "c_contextid", INT_WIDTHS)?,
            },
            my_rank: l.field(&t, "c_my_rank", INT_WIDTHS)?,
            local_group: l.field(&t, "c_local_group", &[p])?,
            flags: l.field(&t, "c_flags", INT_WIDTHS)?,
            pml_comm: try_field(&t, "c_pml_comm", &[p]).ok(),
        })
    });
    let group = l.ty("ompi_group_t")?.and_then(|t| {
        Some(GroupLayout {
            span: t.byte_size,
            count: l.field(&t, "grp_proc_count", INT_WIDTHS)?,
            procs: l.field(&t, "grp_proc_pointers", &[p])?,
            flags: l.field(&t, "grp_flags", INT_WIDTHS)?,
        })
    });
    let req = request_layout(&mut l)?;
    let datatype = match (l.ty("ompi_datatype_t")?, l.ty("opal_datatype_t")?) {
        (Some(o), Some(d)) => (|| {
            let sup = l.field(&o, "super", &[])?;
            let size = nested(sup, l.field(&d, "size", INT_WIDTHS)?);
            let name = l.field(&o, "name", &[])?;
            Some(DatatypeLayout {
                span: span(&[Some(size), Some(name)]),
                size,
                name,
            })
        })(),
        _ => None,
    };
    let (
        Some(array),
        Some(free_list),
        Some(list_next),
        Some(comm),
        Some(group),
        Some(req),
        Some(datatype),
    ) = (array, free_list, list_next, comm, group, req, datatype)
    else {
        return Ok(Err(l.lacks()));
    };
    if !l.missing.is_empty() {
        return Ok(Err(l.lacks()));
    }
    let ob1 = ob1_layout(&mut l, sentinel.map(|s| s.offset).unwrap_or(0))?;
    if comm.pml_comm.is_none() {
        l.missing.push("ompi_communicator_t.c_pml_comm".into());
    }
    if ob1.is_none() || comm.pml_comm.is_none() {
        l.missing
            .push("the PML ob1 types (unexpected messages are not shown)".into());
    }
    Ok(Ok((
        OmpiLayout {
            array,
            free_list,
            list_next,
            comm,
            group,
            req,
            datatype,
            ob1,
        },
        l.missing,
    )))
}

fn request_layout(l: &mut Lookup<'_>) -> NativeResult<Option<RequestLayout>> {
    let p = l.pointer_size();
    let o = l.ty("ompi_request_t")?;
    let st = l.ty("ompi_status_public_t")?;
    let b = l.ty("mca_pml_base_request_t")?;
    let s = l.ty("mca_pml_base_send_request_t")?;
    let r = l.ty("mca_pml_base_recv_request_t")?;
    let (Some(o), Some(st), Some(b), Some(s), Some(r)) = (o, st, b, s, r) else {
        return Ok(None);
    };
    let f = |l: &mut Lookup<'_>, t: &TypeLayout, m: &str, sizes: &[u64]| l.field(t, m, sizes);
    let (Some(sb), Some(rb), Some(ompi), Some(status)) = (
        f(l, &s, "req_base", &[]),
        f(l, &r, "req_base", &[]),
        f(l, &b, "req_ompi", &[]),
        f(l, &o, "req_status", &[]),
    ) else {
        return Ok(None);
    };
    // Both request kinds start with the same base request.
    if sb.offset != rb.offset {
        l.missing
            .push("mca_pml_base_send_request_t.req_base at the offset of the receive's".into());
        return Ok(None);
    }
    let base = |x: FieldLayout| nested(sb, x);
    let in_ompi = |x: FieldLayout| base(nested(ompi, x));
    let in_status = |x: FieldLayout| in_ompi(nested(status, x));
    let fields = (
        f(l, &o, "req_state", INT_WIDTHS),
        f(l, &o, "req_type", INT_WIDTHS),
        f(l, &o, "req_complete", INT_WIDTHS),
        f(l, &st, "MPI_SOURCE", INT_WIDTHS),
        f(l, &st, "MPI_TAG", INT_WIDTHS),
        f(l, &st, "_ucount", INT_WIDTHS),
        f(l, &b, "req_pml_complete", INT_WIDTHS),
        f(l, &b, "req_type", INT_WIDTHS),
        f(l, &b, "req_comm", &[p]),
        f(l, &b, "req_datatype", &[p]),
        f(l, &b, "req_addr", &[p]),
        f(l, &b, "req_count", INT_WIDTHS),
        f(l, &b, "req_peer", INT_WIDTHS),
        f(l, &b, "req_tag", INT_WIDTHS),
    );
    let more = (
        f(l, &s, "req_addr", &[p]),
        f(l, &s, "req_bytes_packed", INT_WIDTHS),
        f(l, &r, "req_bytes_packed", INT_WIDTHS),
    );
    let (
        (
            Some(state),
            Some(ompi_type),
            Some(complete),
            Some(source),
            Some(tag_s),
            Some(ucount),
            Some(pml_complete),
            Some(pml_type),
            Some(comm),
            Some(datatype),
            Some(addr),
            Some(count),
            Some(peer),
            Some(tag),
        ),
        (Some(send_addr), Some(send_bytes_packed), Some(recv_bytes_packed)),
    ) = (fields, more)
    else {
        return Ok(None);
    };
    Ok(Some(RequestLayout {
        send_span: s.byte_size,
        recv_span: r.byte_size,
        state: in_ompi(state),
        ompi_type: in_ompi(ompi_type),
        complete: in_ompi(complete),
        status_source: in_status(source),
        status_tag: in_status(tag_s),
        status_ucount: in_status(ucount),
        pml_complete: base(pml_complete),
        pml_type: base(pml_type),
        comm: base(comm),
        datatype: base(datatype),
        addr: base(addr),
        count: base(count),
        peer: base(peer),
        tag: base(tag),
        send_addr,
        send_bytes_packed,
        recv_bytes_packed,
    }))
}

/// The ob1 types; absent ones are recorded (they are optional).
fn ob1_layout(l: &mut Lookup<'_>, sentinel: u64) -> NativeResult<Option<Ob1Layout>> {
    let p = l.pointer_size();
    let names = [
        "mca_pml_ob1_comm_t",
        "mca_pml_ob1_comm_proc_t",
        "mca_pml_ob1_recv_frag_t",
        "mca_pml_ob1_hdr_t",
        "mca_pml_ob1_common_hdr_t",
        "mca_pml_ob1_match_hdr_t",
        "mca_pml_ob1_rendezvous_hdr_t",
        "mca_btl_base_segment_t",
    ];
    let mut t = Vec::new();
    for n in names {
        t.push(l.ty(n)?);
    }
    let [
        Some(c),
        Some(cp),
        Some(fr),
        Some(h),
        Some(ch),
        Some(mh),
        Some(rh),
        Some(seg),
    ] = <[Option<TypeLayout>; 8]>::try_from(t).unwrap_or_default()
    else {
        return Ok(None);
    };
    let g = |l: &mut Lookup<'_>, t: &TypeLayout, m: &str, sizes: &[u64]| l.field(t, m, sizes);
    let got = (
        g(l, &c, "procs", &[p]),
        g(l, &c, "num_procs", INT_WIDTHS),
        g(l, &cp, "unexpected_frags", &[]),
        g(l, &fr, "hdr", &[]),
        g(l, &fr, "num_segments", INT_WIDTHS),
        g(l, &fr, "segments", &[]),
        g(l, &h, "hdr_match", &[]),
        g(l, &h, "hdr_rndv", &[]),
        g(l, &mh, "hdr_common", &[]),
        g(l, &ch, "hdr_type", &[1]),
        g(l, &mh, "hdr_ctx", INT_WIDTHS),
        g(l, &mh, "hdr_src", INT_WIDTHS),
        g(l, &mh, "hdr_tag", INT_WIDTHS),
    );
    let more = (
        g(l, &rh, "hdr_msg_length", INT_WIDTHS),
        g(l, &seg, "seg_addr", &[p]),
        g(l, &seg, "seg_len", INT_WIDTHS),
    );
    let (
        (
            Some(procs),
            Some(num_procs),
            Some(unexpected),
            Some(hdr),
            Some(num_segments),
            Some(segments),
            Some(hdr_match),
            Some(hdr_rndv),
            Some(common),
            Some(hdr_type),
            Some(ctx),
            Some(src),
            Some(tag),
        ),
        (Some(msg_length), Some(seg_addr), Some(seg_len)),
    ) = (got, more)
    else {
        return Ok(None);
    };
    let in_match = |x: FieldLayout| nested(hdr, nested(hdr_match, x));
    Ok(Some(Ob1Layout {
        comm_span: span(&[Some(procs), Some(num_procs)]),
        procs,
        num_procs,
        unexpected_sentinel: unexpected.offset + sentinel,
        frag_span: span(&[Some(hdr), Some(num_segments), Some(segments)]),
        hdr_type: in_match(nested(common, hdr_type)),
        hdr_ctx: in_match(ctx),
        hdr_src: in_match(src),
        hdr_tag: in_match(tag),
        msg_length: nested(hdr, nested(hdr_rndv, msg_length)),
        num_segments,
        segments,
        seg_stride: seg.byte_size,
        seg_addr,
        seg_len,
        match_hdr_size: mh.byte_size,
    }))
}
