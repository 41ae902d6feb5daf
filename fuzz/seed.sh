#!/bin/bash
# Writes the seed corpora of the fuzz targets that need real input to get anywhere:
#   elf_types, elf_sparse   the starter fixture (DWARF 4 and 5, linked and as an object), /usr/bin/true
#   mpi2dd_snapshot/_traversal  valid MPI2DD processes in four data models (mpi2dd::fuzzing::seeds)
#   mpi2dd_decoders         their MPI2DD_info and what follows it (mpi2dd::fuzzing::decoder_seeds)
#   wire                    valid pipe messages of every kind (mpir_mqd::fuzzing::seed_stream)
#   agent_wire              hellos, a welcome, a refusal, messages of every kind (mpir_wire::fuzzing::seeds)
#   core                    the first 32 KiB of a gcore of `sleep` (headers and notes; needs gdb)
#   elf_symbolize           the unwinder fixture with DWARF (-O2: inline frames), the starter ones
#   unwind                  the harness input of `tests/unwind_no_panic.rs`'s seed: a pc at the
#                           fixture's on_signal, a stack whose top word returns into main, and
#                           the fixture itself (no -g: it must fit 64 KiB) as the image
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
mkdir -p "$corpus/elf_symbolize" "$corpus/unwind"
gcc -g -O2 -pthread "$fixtures/unwind_chain.c" -o "$corpus/elf_symbolize/unwind_chain-O2"
cp "$corpus/elf_types/starter-dwarf5" "$corpus/elf_symbolize/"
tmp=$(mktemp -d)
gcc -O2 -fno-omit-frame-pointer -pthread "$fixtures/unwind_chain.c" -o "$tmp/image"
python3 - "$tmp/image" "$corpus/unwind/chain" <<'PY'
import struct, subprocess, sys
image, out = sys.argv[1], sys.argv[2]
syms = {}
for line in subprocess.run(["nm", image], capture_output=True, text=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 3:
        syms[parts[2]] = int(parts[0], 16)
words = [0x5555_0000_0000 + syms["main"] + 8] + [i * 0x10 for i in range(1, 64)]
data = struct.pack("<HH", syms["on_signal"], len(words))
data += b"".join(struct.pack("<Q", w) for w in words) + open(image, "rb").read()
open(out, "wb").write(data)
PY
rm -rf "$tmp"
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
cargo run -q --manifest-path "$here/../Cargo.toml" -p mpir-wire --features fuzzing --example fuzz_seeds -- "$corpus"
