//! Writes the MPI2DD fuzz targets' seed corpus: `cargo run -p mpi2dd --example fuzz_seeds --
//! fuzz/corpus` creates `mpi2dd_snapshot/` and `mpi2dd_traversal/` there, one file per valid
//! process of [`mpi2dd::fuzzing::seeds`].

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(
        std::env::args_os()
            .nth(1)
            .unwrap_or_else(|| "corpus".into()),
    );
    for target in ["mpi2dd_snapshot", "mpi2dd_traversal"] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for (name, bytes) in mpi2dd::fuzzing::seeds() {
            std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
        }
        println!("{}", dir.display());
    }
    Ok(())
}
