//! Writes the seeds of the `agent_wire` fuzz target into `CORPUS_DIR/agent_wire/`
//! (called by `fuzz/seed.sh`).

fn main() -> std::io::Result<()> {
    let corpus = std::env::args_os()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| "fuzz/corpus".into());
    let dir = corpus.join("agent_wire");
    std::fs::create_dir_all(&dir)?;
    for (i, seed) in mpir_wire::fuzzing::seeds().iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}")), seed)?;
    }
    Ok(())
}
