//! Open MPI ob1 (to come).
use mpir_target::Target;

use crate::native::Detected;
use crate::native::error::NativeResult;
use crate::native::snapshot::Snapshot;
use crate::native::{ProcessInfo, Walk, WalkOptions};

#[derive(Debug, Clone)]
pub(crate) struct OmpiLayout;

pub(crate) fn detect(_target: &dyn Target) -> NativeResult<Detected<OmpiLayout>> {
    Ok(Err(vec!["symbol ompi_mpi_communicators".into()]))
}

pub(crate) fn walk(
    _l: &OmpiLayout,
    _s: &Snapshot<'_>,
    _p: &ProcessInfo,
    _o: &WalkOptions,
) -> NativeResult<Walk> {
    unreachable!()
}
