#!/bin/bash
# Writes the seed corpora of the fuzz targets that need real input to get anywhere:
#   elf_types, elf_sparse   the starter fixture (DWARF 4 and 5, linked and as an object), /usr/bin/true
#   mpi2dd_snapshot/_traversal  valid MPI2DD processes in four data models (mpi2dd::fuzzing::seeds)
#   mpi2dd_decoders         their MPI2DD_info and what follows it (mpi2dd::fuzzing::decoder_seeds)
#   wire                    valid pipe messages of every kind (mpir_mqd::fuzzing::seed_stream)
#   core                    the first 32 KiB of a gcore of `sleep` (headers and notes; needs gdb)
# The other targets (proctable, communicator, pending_operation, view) start empty: they decode
# small structs with no magic number or length framing to get past.
# Usage: fuzz/seed.sh [CORPUS_DIR]   (default fuzz/corpus; existing files are kept)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
corpus=$(mkdir -p "${1:-$here/corpus}" && cd "${1:-$here/corpus}" && pwd)
fixtures=$here/../mpir-target/tests/fixtures

for t in elf_types elf_sparse; do
    mkdir -p "$corpus/$t"
    cp /usr/bin/true "$corpus/$t/true"
    for v in 4 5; do
        gcc -g -gdwarf-$v -O2 -I"$fixtures" "$fixtures/starter.c" -o "$corpus/$t/starter-dwarf$v"
    done
    gcc -g -O2 -c -I"$fixtures" "$fixtures/starter.c" -o "$corpus/$t/starter.o"
done
if command -v gcore > /dev/null; then
    mkdir -p "$corpus/core"
    tmp=$(mktemp -d)
    sleep 30 & sleeper=$!
    gcore -o "$tmp/core" $sleeper > /dev/null 2>&1 || true
    kill $sleeper; wait $sleeper 2> /dev/null || true
    head -c 32768 "$tmp/core.$sleeper" > "$corpus/core/gcore-head" || true
    rm -rf "$tmp"
fi
cargo run -q --manifest-path "$here/../Cargo.toml" -p mpi2dd --example fuzz_seeds -- "$corpus"
cargo run -q --manifest-path "$here/../Cargo.toml" -p mpir-mqd --example fuzz_seeds -- "$corpus"
