//! Names the documents share.

use mpir_mqd::MqdError;
use mpir_session::{EngineUsed, RankError, chain};

/// The engine as the documents name it (`none` when no engine could be set up).
pub fn engine_name(engine: Option<&EngineUsed>) -> String {
    engine.map_or_else(|| "none".to_string(), ToString::to_string)
}

/// Why a rank was not read, on one line; with a hint when the engine missed the MPI's types
/// and no types sidecar was given.
pub fn rank_error(e: &RankError, types_given: bool) -> String {
    let text = chain(e);
    if !types_given && !MqdError::missing_types_in(e).is_empty() {
        format!("{text} (the MPI library may lack debug info: give a types sidecar with --types)")
    } else {
        text
    }
}
