//! Choosing a shipped layout set for one process: identify the library from facts the process
//! gives, take the candidate sets, and accept one only when it decodes the process's own known
//! objects consistently.
//!
//! - **Identity.** `mca_pml_base_selected_component` is libmpi's copy of the selected PML's MCA
//!   component header (MCA base ABI 2.1.0, the same from Open MPI 1.x to 5.x: three `int`s, a
//!   16-byte project name, three `int`s, a 32-byte type name, three `int`s, a 64-byte component
//!   name, three `int`s). Its project is `ompi` and its project version the release. The data
//!   model is the process's.
//! - **Proof**, for each candidate: `MPI_COMM_WORLD` and `MPI_COMM_SELF` decode with the
//!   candidate's `ompi_communicator_t`: their object header names their class
//!   (`obj_class->cls_name` is `ompi_communicator_t`; a debug build's `obj_magic_id` is Open
//!   MPI's magic number), their names are `MPI_COMM_WORLD` and `MPI_COMM_SELF`, their context
//!   ids 0 and 1; their groups (class `ompi_group_t`) agree with them on this process's rank and
//!   the size; `MPI_COMM_SELF` has one process; the rank and size agree with the job's table when
//!   the caller knows them; with PML ob1, the world's ob1 state has as many peers as the group and
//!   its wildcard-receive list is a well-formed list (class `opal_list_t`, its sentinel's links
//!   consistent); and the candidate's own `mca_base_component_t` reads back the identity.

use std::sync::Arc;

use mpir_target::{MemoryExt, Target, TypeQuery};
use mpir_types::{CStructBuilder, DataModel, MemberKind, TypeLayout};

use super::{LayoutSet, Release};

/// Open MPI's `OPAL_OBJ_MAGIC_ID`: the first word of every object of a debug build.
const OBJ_MAGIC_ID: u64 = (0xdeaf_beed_u64 << 32) + 0xdeaf_beed;
/// The largest struct the proof reads at once.
const MAX_STRUCT: u64 = 1 << 20;
/// The largest group size believed (Open MPI's `int` ranks; a corrupt word is usually larger).
const MAX_PROCS: i64 = 1 << 24;

/// What the process says about its Open MPI library.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Identity {
    /// The release (the selected PML component's project version).
    pub release: Release,
    /// The process's data model.
    pub model: DataModel,
    /// The selected PML component (`ob1`, `ucx`, `cm`, …).
    pub pml: String,
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Open MPI {} ({}, PML {})",
            self.release, self.model, self.pml
        )
    }
}

/// What the caller knows of the process from the job: its rank in `MPI_COMM_WORLD` and the
/// world's size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Expect {
    /// This process's rank.
    pub rank: Option<u64>,
    /// The job's size.
    pub size: Option<u64>,
}

impl Expect {
    /// Nothing known.
    pub fn nothing() -> Self {
        Expect::default()
    }

    /// The rank (and, when known, the size) from the job's table.
    pub fn rank(rank: Option<u64>, size: Option<u64>) -> Self {
        Expect { rank, size }
    }
}

/// What a candidate's proof found on the process.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Proof {
    /// This process's rank in `MPI_COMM_WORLD`.
    pub world_rank: u64,
    /// The size of `MPI_COMM_WORLD`.
    pub world_size: u64,
    /// The checks made, in order (for `mpir layouts check`).
    pub checks: Vec<String>,
}

/// One candidate set and what its proof said.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Candidate {
    /// The set ([`LayoutSet::id`]).
    pub set: String,
    /// The proof, or the first check that failed.
    pub outcome: Result<Proof, String>,
}

/// The set accepted for a process.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Chosen {
    /// The set.
    pub set: Arc<LayoutSet>,
    /// The library, as the process gave it.
    pub identity: Identity,
    /// What the proof found.
    pub proof: Proof,
    /// Every candidate tried, the chosen one among them.
    pub candidates: Vec<Candidate>,
    /// The release has no set of its own: the set is another release's of the same series.
    pub other_release: bool,
}

impl std::fmt::Display for Chosen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shipped layouts of {}", self.set.id())?;
        if self.other_release {
            write!(f, " (for {}: same series)", self.identity.release)?;
        }
        write!(
            f,
            ", proven on rank {} of {}",
            self.proof.world_rank, self.proof.world_size
        )
    }
}

/// Why no shipped set is used for a process.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalReason {
    /// The library could not be identified (not initialised yet, not Open MPI, or memory not
    /// readable).
    Unidentified(String),
    /// No set is shipped for this release or its series, in this data model.
    NoLayout,
    /// Candidates exist; none decodes the process consistently.
    NoneFits,
    /// More than one candidate decodes the process, and they differ.
    Ambiguous,
}

/// No shipped set for a process: why, with every candidate and what its proof said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub struct LayoutRefusal {
    /// The library, when identified.
    pub identity: Option<Identity>,
    /// Why.
    pub reason: RefusalReason,
    /// The candidates tried.
    pub candidates: Vec<Candidate>,
    /// Every set shipped for the data model (named when none is a candidate).
    pub shipped: Vec<String>,
}

impl std::fmt::Display for LayoutRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no shipped Open MPI layouts fit")?;
        if let Some(i) = &self.identity {
            write!(f, " {i}")?;
        }
        match &self.reason {
            RefusalReason::Unidentified(why) => write!(f, ": cannot identify the library: {why}"),
            RefusalReason::NoLayout => write!(
                f,
                ": none shipped for this release or its series (shipped: {})",
                if self.shipped.is_empty() {
                    "none for this data model".to_string()
                } else {
                    self.shipped.join(", ")
                }
            ),
            RefusalReason::NoneFits | RefusalReason::Ambiguous => {
                if self.reason == RefusalReason::NoneFits {
                    f.write_str(": no candidate decodes this process consistently")?;
                } else {
                    f.write_str(": more than one candidate decodes this process, and they differ")?;
                }
                for c in &self.candidates {
                    match &c.outcome {
                        Ok(_) => write!(f, "; {} fits", c.set)?,
                        Err(why) => write!(f, "; {}: {why}", c.set)?,
                    }
                }
                Ok(())
            }
        }
    }
}

/// The MCA base component header's layout (ABI 2.1.0), from the C ABI of `model`.
struct ComponentHeader {
    size: u64,
    versions: [u64; 3],
    project: (u64, u64),
    project_version: [u64; 3],
    type_name: (u64, u64),
    component: (u64, u64),
}

fn component_header(model: &DataModel) -> ComponentHeader {
    let int = model.int_size();
    let mut s = CStructBuilder::new();
    let versions = [
        s.scalar(int).offset,
        s.scalar(int).offset,
        s.scalar(int).offset,
    ];
    let project = s.array(1, 16);
    let project_version = [
        s.scalar(int).offset,
        s.scalar(int).offset,
        s.scalar(int).offset,
    ];
    let type_name = s.array(1, 32);
    for _ in 0..3 {
        s.scalar(int);
    }
    let component = s.array(1, 64);
    for _ in 0..3 {
        s.scalar(int);
    }
    ComponentHeader {
        size: s.size(),
        versions,
        project: (project.offset, project.size),
        project_version,
        type_name: (type_name.offset, type_name.size),
        component: (component.offset, component.size),
    }
}

fn int_at(model: &DataModel, bytes: &[u8], offset: u64, size: u64) -> Option<i64> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(size).ok()?)?;
    let b = bytes.get(start..end)?;
    let v = match (size, model.byte_order()) {
        (4, mpir_types::ByteOrder::Little) => i64::from(i32::from_le_bytes(b.try_into().ok()?)),
        (4, _) => i64::from(i32::from_be_bytes(b.try_into().ok()?)),
        (8, mpir_types::ByteOrder::Little) => i64::from_le_bytes(b.try_into().ok()?),
        (8, _) => i64::from_be_bytes(b.try_into().ok()?),
        (2, mpir_types::ByteOrder::Little) => i64::from(i16::from_le_bytes(b.try_into().ok()?)),
        (2, _) => i64::from(i16::from_be_bytes(b.try_into().ok()?)),
        _ => return None,
    };
    Some(v)
}

fn uint_at(model: &DataModel, bytes: &[u8], offset: u64, size: u64) -> Option<u64> {
    let v = int_at(model, bytes, offset, size)?;
    Some(match size {
        4 => u64::from(v as u32),
        2 => u64::from(v as u16),
        _ => v as u64,
    })
}

fn text_at(bytes: &[u8], (offset, size): (u64, u64)) -> Option<String> {
    let start = usize::try_from(offset).ok()?;
    let b = bytes.get(start..start.checked_add(usize::try_from(size).ok()?)?)?;
    let end = b.iter().position(|&c| c == 0)?;
    Some(String::from_utf8_lossy(b.get(..end)?).into_owned())
}

/// The library `target` runs, from its own memory.
pub fn identify(target: &dyn Target) -> Result<Identity, String> {
    read_identity(target).map(|(identity, _)| identity)
}

/// The identity, and the component header's bytes it was read from (the proof reads them
/// again through each candidate's own `mca_base_component_t`, not the process).
fn read_identity(target: &dyn Target) -> Result<(Identity, Vec<u8>), String> {
    let model = target.data_model();
    let sym = target
        .symbol("mca_pml_base_selected_component")
        .map_err(|e| format!("looking up mca_pml_base_selected_component: {e}"))?
        .ok_or("no symbol mca_pml_base_selected_component (not Open MPI's libmpi)")?;
    let h = component_header(&model);
    let bytes = target
        .read_vec(sym.address, h.size)
        .map_err(|e| format!("reading mca_pml_base_selected_component: {e}"))?;
    let versions: Vec<Option<i64>> = h
        .versions
        .iter()
        .map(|&o| int_at(&model, &bytes, o, model.int_size()))
        .collect();
    if versions != [Some(2), Some(1), Some(0)] {
        let all_zero = bytes.iter().all(|&b| b == 0);
        return Err(if all_zero {
            "mca_pml_base_selected_component is empty: MPI is not initialised yet (no PML selected)"
                .to_string()
        } else {
            format!(
                "mca_pml_base_selected_component is not an MCA 2.1.0 component header \
                 (versions {versions:?})"
            )
        });
    }
    let project = text_at(&bytes, h.project).unwrap_or_default();
    let type_name = text_at(&bytes, h.type_name).unwrap_or_default();
    if project != "ompi" || type_name != "pml" {
        return Err(format!(
            "mca_pml_base_selected_component names project {project:?}, type {type_name:?} \
             (expected ompi, pml)"
        ));
    }
    let v: Vec<u32> = h
        .project_version
        .iter()
        .filter_map(|&o| int_at(&model, &bytes, o, model.int_size()))
        .filter_map(|v| u32::try_from(v).ok())
        .collect();
    let [major, minor, patch] = v[..] else {
        return Err("the selected PML's project version is not three small numbers".into());
    };
    let pml = text_at(&bytes, h.component)
        .filter(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        .ok_or("the selected PML component has no readable name")?;
    let identity = Identity {
        release: Release::new(major, minor, patch),
        model,
        pml,
    };
    Ok((identity, bytes))
}

/// A candidate's view of one object.
struct View<'a> {
    target: &'a dyn Target,
    set: &'a LayoutSet,
    model: DataModel,
    checks: Vec<String>,
}

impl View<'_> {
    fn ty(&self, name: &str) -> Result<TypeLayout, String> {
        self.set
            .get(name)
            .ok_or_else(|| format!("the set lacks type {name}"))
    }

    fn read(&self, address: u64, ty: &TypeLayout, what: &str) -> Result<Vec<u8>, String> {
        if ty.byte_size == 0 || ty.byte_size > MAX_STRUCT {
            return Err(format!("{} is {} bytes", ty.name, ty.byte_size));
        }
        self.target
            .read_vec(address, ty.byte_size)
            .map_err(|e| format!("reading {what} ({}) at {address:#x}: {e}", ty.name))
    }

    fn member(&self, ty: &TypeLayout, name: &str) -> Result<(u64, u64), String> {
        let m = ty
            .member(name)
            .ok_or_else(|| format!("{} has no member {name}", ty.name))?;
        let size = m
            .byte_size
            .ok_or_else(|| format!("{}.{name} has no size", ty.name))?;
        Ok((m.offset, size))
    }

    fn int(&self, bytes: &[u8], ty: &TypeLayout, name: &str) -> Result<i64, String> {
        let (o, s) = self.member(ty, name)?;
        int_at(&self.model, bytes, o, s)
            .ok_or_else(|| format!("{}.{name}: {s}-byte integer", ty.name))
    }

    fn uint(&self, bytes: &[u8], ty: &TypeLayout, name: &str) -> Result<u64, String> {
        let (o, s) = self.member(ty, name)?;
        uint_at(&self.model, bytes, o, s)
            .ok_or_else(|| format!("{}.{name}: {s}-byte word", ty.name))
    }

    /// The object header at the start of `bytes` (an `opal_object_t` first member) names class
    /// `class`.
    fn object(&mut self, bytes: &[u8], class: &str, what: &str) -> Result<(), String> {
        let obj = self.ty("opal_object_t")?;
        if self.set.debug {
            let magic = self.uint(bytes, &obj, "obj_magic_id")?;
            if magic != OBJ_MAGIC_ID {
                return Err(format!(
                    "{what}: obj_magic_id is {magic:#x}, not Open MPI's debug magic {OBJ_MAGIC_ID:#x}"
                ));
            }
        }
        let class_ptr = self.uint(bytes, &obj, "obj_class")?;
        let cls = self.ty("opal_class_t")?;
        let (name_off, _) = self.member(&cls, "cls_name")?;
        let name_ptr = self
            .target
            .read_pointer(class_ptr.wrapping_add(name_off), "opal_class_t.cls_name")
            .map_err(|e| format!("{what}: its class at {class_ptr:#x}: {e}"))?;
        let name = self
            .target
            .read_c_string(name_ptr, 64)
            .map_err(|e| format!("{what}: its class name at {name_ptr:#x}: {e}"))?;
        if name != class.as_bytes() {
            return Err(format!(
                "{what}: its class is {:?}, not {class}",
                String::from_utf8_lossy(&name)
            ));
        }
        self.checks
            .push(format!("{what} is an object of class {class}"));
        Ok(())
    }

    /// One predefined communicator; returns (rank, size).
    fn communicator(
        &mut self,
        symbol: &str,
        name: &str,
        cid: i64,
    ) -> Result<(i64, i64, Vec<u8>, TypeLayout), String> {
        let comm_t = self.ty("ompi_communicator_t")?;
        let sym = self
            .target
            .symbol(symbol)
            .map_err(|e| format!("looking up {symbol}: {e}"))?
            .ok_or_else(|| format!("no symbol {symbol}"))?;
        let bytes = self.read(sym.address, &comm_t, symbol)?;
        self.object(&bytes, "ompi_communicator_t", symbol)?;
        // An array in 4.x, a pointer to the name in 5.x.
        let (o, s) = self.member(&comm_t, "c_name")?;
        let found = if comm_t.member("c_name").map(|m| m.kind) == Some(MemberKind::Pointer) {
            let at = self.uint(&bytes, &comm_t, "c_name")?;
            let name = self
                .target
                .read_c_string(at, 64)
                .map_err(|e| format!("{symbol}.c_name at {at:#x}: {e}"))?;
            String::from_utf8_lossy(&name).into_owned()
        } else {
            text_at(&bytes, (o, s)).unwrap_or_else(|| "(unterminated)".into())
        };
        if found != name {
            return Err(format!("{symbol}.c_name is {found:?}, not {name}"));
        }
        let id_member = if comm_t.member("c_index").is_some() {
            "c_index"
        } else {
            "c_contextid"
        };
        let id = self.int(&bytes, &comm_t, id_member)?;
        if id != cid {
            return Err(format!("{symbol}.{id_member} is {id}, not {cid}"));
        }
        let my_rank = self.int(&bytes, &comm_t, "c_my_rank")?;
        let group_ptr = self.uint(&bytes, &comm_t, "c_local_group")?;
        let group_t = self.ty("ompi_group_t")?;
        let group = self.read(group_ptr, &group_t, &format!("{symbol}.c_local_group"))?;
        self.object(&group, "ompi_group_t", &format!("{symbol}.c_local_group"))?;
        let size = self.int(&group, &group_t, "grp_proc_count")?;
        let group_rank = self.int(&group, &group_t, "grp_my_rank")?;
        if !(1..=MAX_PROCS).contains(&size) {
            return Err(format!("{symbol}'s group has {size} processes"));
        }
        if group_rank != my_rank || !(0..size).contains(&my_rank) {
            return Err(format!(
                "{symbol}.c_my_rank is {my_rank}, its group's grp_my_rank {group_rank}, of {size}"
            ));
        }
        self.checks.push(format!(
            "{symbol} is {name}, context id {cid}, rank {my_rank} of {size} (its group agrees)"
        ));
        Ok((my_rank, size, bytes, comm_t))
    }

    /// The world's ob1 state: as many peers as the group, a well-formed wildcard list.
    fn ob1(&mut self, world: &[u8], comm_t: &TypeLayout, size: i64) -> Result<(), String> {
        let ptr = self.uint(world, comm_t, "c_pml_comm")?;
        let ob1_t = self.ty("mca_pml_ob1_comm_t")?;
        let ob1 = self.read(ptr, &ob1_t, "MPI_COMM_WORLD's ob1 state")?;
        let peers = self.int(&ob1, &ob1_t, "num_procs")?;
        if peers != size {
            return Err(format!(
                "MPI_COMM_WORLD's ob1 state has num_procs {peers}, its group {size} processes"
            ));
        }
        let (wild, _) = self.member(&ob1_t, "wild_receives")?;
        let list_t = self.ty("opal_list_t")?;
        let item_t = self.ty("opal_list_item_t")?;
        let list_at = ptr.wrapping_add(wild);
        let list = self.read(list_at, &list_t, "the ob1 wildcard-receive list")?;
        self.object(&list, "opal_list_t", "the ob1 wildcard-receive list")?;
        let (sentinel, _) = self.member(&list_t, "opal_list_sentinel")?;
        let sentinel_at = list_at.wrapping_add(sentinel);
        let (next_o, next_s) = self.member(&item_t, "opal_list_next")?;
        let (prev_o, prev_s) = self.member(&item_t, "opal_list_prev")?;
        let next = uint_at(&self.model, &list, sentinel.saturating_add(next_o), next_s)
            .ok_or("sentinel next")?;
        let prev = uint_at(&self.model, &list, sentinel.saturating_add(prev_o), prev_s)
            .ok_or("sentinel prev")?;
        let length = self.uint(&list, &list_t, "opal_list_length")?;
        let first_prev = if next == sentinel_at {
            sentinel_at
        } else {
            self.target
                .read_pointer(next.wrapping_add(prev_o), "opal_list_item_t.opal_list_prev")
                .map_err(|e| format!("the wildcard list's first item at {next:#x}: {e}"))?
        };
        let empty_ok = length == 0 && next == sentinel_at && prev == sentinel_at;
        let full_ok =
            length > 0 && next != sentinel_at && prev != sentinel_at && first_prev == sentinel_at;
        if !(empty_ok || full_ok) {
            return Err(format!(
                "the ob1 wildcard-receive list is not well formed: length {length}, sentinel at \
                 {sentinel_at:#x}, next {next:#x}, prev {prev:#x}"
            ));
        }
        self.checks.push(format!(
            "MPI_COMM_WORLD's ob1 state has {peers} peers and a well-formed wildcard list of {length}"
        ));
        Ok(())
    }

    /// The set's own `mca_base_component_t` reads back the identity from `header`, the
    /// component header's bytes the identity was read from.
    fn component(&mut self, identity: &Identity, header: &[u8]) -> Result<(), String> {
        let ty = self.ty("mca_base_component_t")?;
        let v = [
            self.int(header, &ty, "mca_project_major_version")?,
            self.int(header, &ty, "mca_project_minor_version")?,
            self.int(header, &ty, "mca_project_release_version")?,
        ];
        let r = identity.release;
        if v != [i64::from(r.major), i64::from(r.minor), i64::from(r.patch)] {
            return Err(format!(
                "the set's mca_base_component_t reads version {v:?}, not {r}"
            ));
        }
        Ok(())
    }
}

/// Proves `set` on `target`.
fn prove(
    target: &dyn Target,
    set: &LayoutSet,
    identity: &Identity,
    header: &[u8],
    expect: Expect,
) -> Result<Proof, String> {
    if set.model != identity.model {
        return Err(format!(
            "the set is for {}, the process is {}",
            set.model, identity.model
        ));
    }
    let mut v = View {
        target,
        set,
        model: identity.model,
        checks: Vec::new(),
    };
    v.component(identity, header)?;
    let (rank, size, world, comm_t) = v.communicator("ompi_mpi_comm_world", "MPI_COMM_WORLD", 0)?;
    let (self_rank, self_size, _, _) = v.communicator("ompi_mpi_comm_self", "MPI_COMM_SELF", 1)?;
    if (self_rank, self_size) != (0, 1) {
        return Err(format!(
            "MPI_COMM_SELF is rank {self_rank} of {self_size}, not 0 of 1"
        ));
    }
    let (rank, size) = (rank as u64, size as u64);
    if let Some(r) = expect.rank.filter(|&r| r != rank) {
        return Err(format!(
            "MPI_COMM_WORLD says rank {rank}; the job's table says {r}"
        ));
    }
    if let Some(s) = expect.size.filter(|&s| s != size) {
        return Err(format!(
            "MPI_COMM_WORLD has {size} processes; the job's table {s}"
        ));
    }
    if identity.pml == "ob1" {
        v.ob1(&world, &comm_t, size as i64)?;
    }
    Ok(Proof {
        world_rank: rank,
        world_size: size,
        checks: v.checks,
    })
}

/// Whether `target` is an Open MPI process without the types its queue readers need: it defines
/// `ompi_mpi_comm_world`, and neither the debug information of the image that defines it (its
/// own DWARF or a separate debug file) nor a types sidecar describes `ompi_communicator_t`
/// (none, or unreadable DWARF). Other images are not searched: a program compiled with `-g`
/// against `mpi.h` only declares the type, and indexing every library's DWARF for it would cost
/// more than the whole read.
pub fn needs_shipped(target: &dyn Target) -> bool {
    let Ok(Some(_)) = target.symbol("ompi_mpi_comm_world") else {
        return false;
    };
    let near = TypeQuery::NamedNear {
        name: "ompi_communicator_t",
        symbol: "ompi_mpi_comm_world",
    };
    !matches!(target.type_layout(near), Ok(Some(_)))
}

/// Chooses among the sets shipped with this build ([`shipped`](super::shipped)).
pub fn choose(target: &dyn Target, expect: Expect) -> Result<Chosen, LayoutRefusal> {
    choose_among(target, super::shipped(), expect)
}

/// Chooses among `sets`: the candidates are those of the process's release and data model (or,
/// when there are none, of its `major.minor` series); exactly one must fit (or several whose
/// layouts are identical).
pub fn choose_among(
    target: &dyn Target,
    sets: &[Arc<LayoutSet>],
    expect: Expect,
) -> Result<Chosen, LayoutRefusal> {
    let model = target.data_model();
    let shipped: Vec<String> = sets
        .iter()
        .filter(|s| s.model == model)
        .map(|s| s.id())
        .collect();
    let (identity, header) = read_identity(target).map_err(|why| LayoutRefusal {
        identity: None,
        reason: RefusalReason::Unidentified(why),
        candidates: Vec::new(),
        shipped: shipped.clone(),
    })?;
    let of_model = || sets.iter().filter(|s| s.model == model);
    let mut pool: Vec<&Arc<LayoutSet>> = of_model()
        .filter(|s| s.release == identity.release)
        .collect();
    let other_release = pool.is_empty();
    if other_release {
        pool = of_model()
            .filter(|s| s.release.same_series(&identity.release))
            .collect();
    }
    if pool.is_empty() {
        return Err(LayoutRefusal {
            identity: Some(identity),
            reason: RefusalReason::NoLayout,
            candidates: Vec::new(),
            shipped,
        });
    }
    let candidates: Vec<Candidate> = pool
        .iter()
        .map(|s| Candidate {
            set: s.id(),
            outcome: prove(target, s, &identity, &header, expect),
        })
        .collect();
    // The sets that fit, with their proofs.
    let fits: Vec<(&Arc<LayoutSet>, &Proof)> = pool
        .iter()
        .zip(&candidates)
        .filter_map(|(s, c)| Some((*s, c.outcome.as_ref().ok()?)))
        .collect();
    let refuse = |reason| LayoutRefusal {
        identity: Some(identity.clone()),
        reason,
        candidates: candidates.clone(),
        shipped: shipped.clone(),
    };
    let Some(((first, proof), rest)) = fits.split_first() else {
        return Err(refuse(RefusalReason::NoneFits));
    };
    if rest.iter().any(|(s, _)| s.types != first.types) {
        return Err(refuse(RefusalReason::Ambiguous));
    }
    let proof = (*proof).clone();
    Ok(Chosen {
        set: Arc::clone(first),
        identity,
        proof,
        candidates,
        other_release,
    })
}

/// Proves an already chosen set on another process of the same job (each rank is proven before
/// its queues are read with it).
pub fn prove_again(
    target: &dyn Target,
    chosen: &Chosen,
    expect: Expect,
) -> Result<Proof, LayoutRefusal> {
    let refuse = |reason, why: Option<String>| LayoutRefusal {
        identity: None,
        reason,
        candidates: why
            .map(|w| {
                vec![Candidate {
                    set: chosen.set.id(),
                    outcome: Err(w),
                }]
            })
            .unwrap_or_default(),
        shipped: vec![chosen.set.id()],
    };
    let (identity, header) =
        read_identity(target).map_err(|w| refuse(RefusalReason::Unidentified(w), None))?;
    if identity != chosen.identity {
        return Err(LayoutRefusal {
            identity: Some(identity),
            ..refuse(
                RefusalReason::NoneFits,
                Some(format!(
                    "this process runs another library than {}",
                    chosen.identity
                )),
            )
        });
    }
    prove(target, &chosen.set, &identity, &header, expect).map_err(|w| LayoutRefusal {
        identity: Some(identity.clone()),
        ..refuse(RefusalReason::NoneFits, Some(w))
    })
}

#[cfg(test)]
pub(super) fn header_offsets(model: &DataModel) -> [(&'static str, u64); 6] {
    let h = component_header(model);
    [
        ("mca_project_name", h.project.0),
        ("mca_project_major_version", h.project_version[0]),
        ("mca_type_name", h.type_name.0),
        ("mca_component_name", h.component.0),
        ("mca_major_version", h.versions[0]),
        ("mca_release_version", h.versions[2]),
    ]
}
