//! Property tests: values laid out in a MockTarget in a given data model and layout read back
//! equal, in all four {little, big} × {32, 64}-bit combinations (and LLP64), with ABI layouts
//! and with randomised DWARF-style layouts (member order, gaps, tail padding, pid width), while
//! the target returns short reads.

use mpir_target::mock::{MockRank, MockStarter, MockTarget};
use mpir_target::proctable::{ReadOptions, read_proctable};
use mpir_target::{MemoryExt, TypeQuery};
use mpir_types::mpir::{EntryField, Implausible, ProblemKind, ProcDescLayout};
use mpir_types::mqd::{
    self, Communicator, CommunicatorLayout, OpStatus, PendingOperation, PendingOperationLayout,
};
use mpir_types::{DataModel, LayoutSource, TypeLayout};
use proptest::prelude::*;
use proptest::sample::select;

const MODELS: [DataModel; 5] = [
    DataModel::LP64,
    DataModel::ILP32,
    DataModel::LP64_BE,
    DataModel::ILP32_BE,
    DataModel::LLP64,
];

/// A struct layout with the given members in a random order, with random aligned gaps between
/// them and random tail padding: what a different compiler or a vendor's declaration might give.
fn shuffled_layout(
    name: &'static str,
    members: Vec<(&'static str, u64)>,
) -> impl Strategy<Value = TypeLayout> {
    let n = members.len();
    (
        Just(members).prop_shuffle(),
        prop::collection::vec(0u64..3, n),
        0u64..3,
    )
        .prop_map(move |(members, gaps, tail)| {
            let mut t = TypeLayout::new(name, 0, LayoutSource::DebugInfo { file: None });
            let mut offset = 0u64;
            let mut align = 1u64;
            for ((m, size), gap) in members.into_iter().zip(gaps) {
                let a = size.clamp(1, 8);
                offset = offset.next_multiple_of(a) + gap * a;
                t = t.with_member(m, offset, size);
                offset += size;
                align = align.max(a);
            }
            t.byte_size = (offset + tail * align).next_multiple_of(align);
            t
        })
}

fn name_strategy() -> impl Strategy<Value = String> {
    // Any UTF-8 without NUL, including empty names and multi-byte characters.
    "[^\u{0}]{0,24}"
}

#[derive(Debug, Clone)]
struct StarterCase {
    starter: MockStarter,
    chunk: Option<usize>,
}

fn starter_case(model: DataModel) -> impl Strategy<Value = StarterCase> {
    let ptr = model.pointer_size();
    let layout = prop_oneof![
        Just(None),
        select(vec![2u64, 4, 8])
            .prop_flat_map(move |pid| shuffled_layout(
                "MPIR_PROCDESC",
                vec![("host_name", ptr), ("executable_name", ptr), ("pid", pid)],
            ))
            .prop_map(move |t| Some(ProcDescLayout::from_type(&t, &model).unwrap())),
    ];
    (
        layout,
        prop::collection::vec((name_strategy(), name_strategy()), 0..40),
        any::<bool>(),
        prop::option::of(1usize..40),
        // Up to 40 ranks from first_pid: every pid must fit the narrowest layout drawn (2 bytes).
        1i64..0x7fff - 40,
    )
        .prop_map(move |(layout, names, share, chunk, first_pid)| {
            let ranks = names
                .into_iter()
                .enumerate()
                .map(|(i, (h, e))| MockRank::new(h, e, first_pid + i as i64))
                .collect();
            let mut starter = MockStarter::new(ranks);
            starter.layout = layout;
            starter.share_strings = share;
            StarterCase { starter, chunk }
        })
}

fn check_proctable(model: DataModel, case: &StarterCase) -> Result<(), TestCaseError> {
    let mut b = MockTarget::builder(model);
    if let Some(c) = case.chunk {
        b.max_read_chunk(c);
    }
    let placed = case.starter.place(&mut b);
    let target = b.build();
    let table = read_proctable(&target, &ReadOptions::default()).unwrap();
    prop_assert_eq!(table.table_address, placed.table_address);
    prop_assert_eq!(&table.raw, &placed.raw);
    // Every name reads back; the only problems are names that are no plausible name (empty,
    // or holding control characters), each flagged and kept.
    let expected: Vec<(u64, EntryField, Implausible)> = case
        .starter
        .ranks
        .iter()
        .zip(0u64..)
        .flat_map(|(r, rank)| {
            [
                (EntryField::HostName, &r.host),
                (EntryField::ExecutableName, &r.executable),
            ]
            .into_iter()
            .filter_map(move |(field, name)| {
                let why = if name.is_empty() {
                    Implausible::Empty
                } else if name.bytes().any(|b| b < 0x20 || b == 0x7f) {
                    Implausible::ControlBytes
                } else {
                    return None;
                };
                Some((rank, field, why))
            })
        })
        .collect();
    let found: Vec<(u64, EntryField, Implausible)> = table
        .resolved
        .problems
        .iter()
        .map(|p| match p.kind {
            ProblemKind::Implausible { reason, .. } => (p.rank, p.field, reason),
            ref other => panic!("unexpected problem {other:?}"),
        })
        .collect();
    prop_assert_eq!(found, expected);
    prop_assert_eq!(table.resolved.entries.len(), case.starter.ranks.len());
    for (entry, rank) in table.resolved.ranks().zip(&case.starter.ranks) {
        prop_assert_eq!(entry.host, Some(rank.host.as_str()));
        prop_assert_eq!(entry.executable, Some(rank.executable.as_str()));
        prop_assert_eq!(entry.pid, rank.pid);
    }
    // The layout used is the one described, and says where it came from.
    match &case.starter.layout {
        Some(given) => {
            let geometry = |l: &ProcDescLayout| (l.size, l.host_name, l.executable_name, l.pid);
            prop_assert_eq!(geometry(&table.layout), geometry(given));
            let from_debug_info = matches!(table.layout.source, LayoutSource::DebugInfo { .. });
            prop_assert!(from_debug_info);
            prop_assert!(
                target
                    .type_layout(TypeQuery::PointeeOfVariable("MPIR_proctable"))
                    .unwrap()
                    .is_some()
            );
        }
        None => prop_assert_eq!(table.layout.clone(), ProcDescLayout::abi(&model)),
    }
    prop_assert!(target.writes().is_empty(), "reading must not write");
    Ok(())
}

use mpir_target::TypeLookup;

fn communicator_strategy(model: DataModel) -> impl Strategy<Value = Communicator> {
    let bits = 8 * model.long_size() as u32;
    let umax = if bits == 64 {
        u64::MAX
    } else {
        (1 << bits) - 1
    };
    let imax = (umax >> 1) as i64;
    (0..=umax, -imax..=imax, -imax..=imax, "[a-zA-Z_0-9 ]{0,63}").prop_map(
        |(unique_id, local_rank, size, name)| Communicator {
            unique_id,
            local_rank,
            size,
            name,
        },
    )
}

fn operation_strategy(model: DataModel) -> impl Strategy<Value = PendingOperation> {
    let lbits = 8 * model.long_size() as u32;
    let lmax = (if lbits == 64 {
        u64::MAX
    } else {
        (1 << lbits) - 1
    } >> 1) as i64;
    let umax = if lbits == 64 {
        u64::MAX
    } else {
        (1 << lbits) - 1
    };
    let word = move || -lmax..=lmax;
    (
        (-3i64..5).prop_map(OpStatus::from_raw),
        (word(), word(), any::<bool>(), word(), word()),
        (any::<bool>(), 0..=umax),
        (word(), word(), word(), word()),
        prop::collection::vec("[ -~]{1,63}", 0..=5),
    )
        .prop_map(
            |(status, (dl, dg, tw, dt, dlen), (sb, buf), (al, ag, at, alen), extra)| {
                PendingOperation {
                    status,
                    desired_local_rank: dl,
                    desired_global_rank: dg,
                    tag_wild: tw,
                    desired_tag: dt,
                    desired_length: dlen,
                    system_buffer: sb,
                    buffer: buf,
                    actual_local_rank: al,
                    actual_global_rank: ag,
                    actual_tag: at,
                    actual_length: alen,
                    extra_text: extra,
                }
            },
        )
}

fn comm_layout(model: DataModel) -> impl Strategy<Value = CommunicatorLayout> {
    let l = model.long_size();
    prop_oneof![
        Just(CommunicatorLayout::abi(&model)),
        shuffled_layout(
            "mqs_communicator",
            vec![
                ("unique_id", l),
                ("local_rank", l),
                ("size", l),
                ("name", 64)
            ]
        )
        .prop_map(move |t| CommunicatorLayout::from_type(&t, &model).unwrap()),
    ]
}

fn op_layout(model: DataModel) -> impl Strategy<Value = PendingOperationLayout> {
    let (i, l) = (model.int_size(), model.long_size());
    let members = vec![
        ("status", i),
        ("desired_local_rank", l),
        ("desired_global_rank", l),
        ("tag_wild", i),
        ("desired_tag", l),
        ("desired_length", l),
        ("system_buffer", i),
        ("buffer", l),
        ("actual_local_rank", l),
        ("actual_global_rank", l),
        ("actual_tag", l),
        ("actual_length", l),
        ("extra_text", 320),
    ];
    prop_oneof![
        Just(PendingOperationLayout::abi(&model)),
        shuffled_layout("mqs_pending_operation", members)
            .prop_map(move |t| PendingOperationLayout::from_type(&t, &model).unwrap()),
    ]
}

/// Places `bytes` in a mock of `model`, reads them back through the Memory trait with short
/// reads, and returns what was read and where.
fn through_mock(model: DataModel, bytes: Vec<u8>, chunk: Option<usize>) -> (u64, Vec<u8>) {
    let mut b = MockTarget::builder(model);
    if let Some(c) = chunk {
        b.max_read_chunk(c);
    }
    let len = bytes.len() as u64;
    let address = b.alloc_with(bytes);
    let target = b.build();
    (address, target.read_vec(address, len).unwrap())
}

fn check_communicator(
    model: DataModel,
    layout: &CommunicatorLayout,
    comm: &Communicator,
    chunk: Option<usize>,
) -> Result<(), TestCaseError> {
    let mut buf = vec![0x5a; layout.size as usize];
    mqd::encode_communicator(&model, layout, comm, &mut buf).unwrap();
    let (address, read) = through_mock(model, buf, chunk);
    let back = mqd::decode_communicator(&model, layout, address, &read).unwrap();
    prop_assert_eq!(&back, comm);
    Ok(())
}

fn check_operation(
    model: DataModel,
    layout: &PendingOperationLayout,
    op: &PendingOperation,
    chunk: Option<usize>,
) -> Result<(), TestCaseError> {
    let mut buf = vec![0x5a; layout.size as usize];
    mqd::encode_pending_operation(&model, layout, op, &mut buf).unwrap();
    let (address, read) = through_mock(model, buf, chunk);
    let back = mqd::decode_pending_operation(&model, layout, address, &read).unwrap();
    prop_assert_eq!(&back, op);
    Ok(())
}

macro_rules! per_model {
    ($($name:ident => $model:expr),* $(,)?) => {$(
        mod $name {
            use super::*;
            proptest! {
                #![proptest_config(ProptestConfig::with_cases(96))]
                #[test]
                fn proctable(case in starter_case($model)) {
                    check_proctable($model, &case)?;
                }
                #[test]
                fn communicator(
                    layout in comm_layout($model),
                    comm in communicator_strategy($model),
                    chunk in prop::option::of(1usize..16),
                ) {
                    check_communicator($model, &layout, &comm, chunk)?;
                }
                #[test]
                fn pending_operation(
                    layout in op_layout($model),
                    op in operation_strategy($model),
                    chunk in prop::option::of(1usize..64),
                ) {
                    check_operation($model, &layout, &op, chunk)?;
                }
            }
        }
    )*};
}

per_model! {
    lp64 => DataModel::LP64,
    ilp32 => DataModel::ILP32,
    lp64_be => DataModel::LP64_BE,
    ilp32_be => DataModel::ILP32_BE,
    llp64 => DataModel::LLP64,
}

/// The same logical table reads the same from every data model, while the bytes differ.
#[test]
fn same_job_in_every_model() {
    let starter = MockStarter::uniform(5, 2, "/usr/bin/app", 4000);
    let mut tables = Vec::new();
    let mut images = Vec::new();
    for model in MODELS {
        let mut b = MockTarget::builder(model);
        let placed = starter.place(&mut b);
        let target = b.build();
        let len = placed.layout.size * 5;
        images.push(target.peek(placed.table_address, len as usize).unwrap());
        tables.push(
            read_proctable(&target, &ReadOptions::default())
                .unwrap()
                .resolved,
        );
    }
    assert!(tables.windows(2).all(|w| w[0] == w[1]));
    // LP64 vs LP64_BE tables differ in byte order; LP64 vs ILP32 in size.
    assert_ne!(images[0], images[2]);
    assert_ne!(images[0].len(), images[1].len());
    assert_eq!(tables[0].rank(4).unwrap().host, Some("node00"));
}
