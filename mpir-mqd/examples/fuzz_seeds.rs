//! Writes the `wire` fuzz target's seed corpus: `cargo run -p mpir-mqd --example fuzz_seeds --
//! fuzz/corpus` creates `wire/seed-stream` there, valid messages of every kind framed as on the
//! pipe ([`mpir_mqd::fuzzing::seed_stream`]).

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(
        std::env::args_os()
            .nth(1)
            .unwrap_or_else(|| "corpus".into()),
    );
    let dir = root.join("wire");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("seed-stream"), mpir_mqd::fuzzing::seed_stream())?;
    println!("{}", dir.display());
    Ok(())
}
