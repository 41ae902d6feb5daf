# gdb reading srun's MPIR table (Debian slurm-client 22.05: PIE, stripped, MPIR_* in .dynsym,
# no DWARF, so every access is cast) — the gdb side of `compare --only srun`.
set $t = *(long*)&MPIR_proctable
set $n = *(int*)&MPIR_proctable_size
set $i = 0
while $i < $n
  printf "[%d] host=%s exe=%s pid=%d\n", $i, *(char**)($t+24*$i), *(char**)($t+24*$i+8), *(int*)($t+24*$i+16)
  set $i = $i + 1
end
printf "gdb-srun entries=%d\n", $n
detach
