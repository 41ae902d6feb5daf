//! Names the documents share.

use mpir_session::EngineUsed;

/// The engine as the documents name it (`none` when no engine could be set up).
pub fn engine_name(engine: Option<&EngineUsed>) -> String {
    engine.map_or_else(|| "none".to_string(), ToString::to_string)
}
