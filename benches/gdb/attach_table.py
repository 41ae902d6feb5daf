# gdb's way to acquire an MPIR job in attach mode, for comparison with mpir-rs:
#   gdb -nx -batch -p STARTER_PID -x benches/gdb/attach_table.py
# Reads MPIR_proctable_size and MPIR_proctable (casts: stock Open MPI has no debug info for
# them), then every entry and its strings, and prints the entry count. The caller times the
# whole gdb run (attach, symbol loading, reading, detach), as ours is timed whole too.
import gdb

inf = gdb.selected_inferior()
n = int(gdb.parse_and_eval("*(int *)&MPIR_proctable_size"))
table = int(gdb.parse_and_eval("*(unsigned long *)&MPIR_proctable"))
cache = {}

def cstr(addr):
    if addr not in cache:
        raw = bytes(inf.read_memory(addr, 256))
        cache[addr] = raw.split(b"\0", 1)[0].decode("utf-8", "replace")
    return cache[addr]

ranks = []
for i in range(n):
    e = bytes(inf.read_memory(table + 24 * i, 24))
    host = int.from_bytes(e[0:8], "little")
    exe = int.from_bytes(e[8:16], "little")
    pid = int.from_bytes(e[16:20], "little", signed=True)
    ranks.append((cstr(host), cstr(exe), pid))
print("gdb-attach entries=%d" % len(ranks))
