//! Writes the MPI2DD fuzz targets' seed corpus: `cargo run -p mpi2dd --example fuzz_seeds --
//! fuzz/corpus` creates `mpi2dd_snapshot/` and `mpi2dd_traversal/` there, one file per valid
//! process of [`mpi2dd::fuzzing::seeds`], and `mpi2dd_decoders/` from
//! [`mpi2dd::fuzzing::decoder_seeds`].

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(
        std::env::args_os()
            .nth(1)
            .unwrap_or_else(|| "corpus".into()),
    );
    for (target, seeds) in [
        ("mpi2dd_snapshot", mpi2dd::fuzzing::seeds()),
        ("mpi2dd_traversal", mpi2dd::fuzzing::seeds()),
        ("mpi2dd_decoders", mpi2dd::fuzzing::decoder_seeds()),
    ] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for (name, bytes) in seeds {
            std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
        }
        println!("{}", dir.display());
    }
    Ok(())
}
