# gdb's way to read an MPIR process descriptor table, for comparison with mpir-rs:
#   gdb -nx -batch -p PID -x benches/gdb/proctable.py
# Reads MPIR_proctable_size and MPIR_proctable, then every entry (host_name, executable_name,
# pid) and every distinct string through gdb.Inferior.read_memory, caching strings by address
# as a careful script would. Prints the entry count and the seconds spent.
import time
import gdb

start = time.monotonic()
inf = gdb.selected_inferior()
n = int(gdb.parse_and_eval("MPIR_proctable_size"))
table = int(gdb.parse_and_eval("(unsigned long)MPIR_proctable"))
cache = {}

def cstr(addr):
    if addr in cache:
        return cache[addr]
    out = b""
    while len(out) < 4096:
        chunk = bytes(inf.read_memory(addr + len(out), 64))
        nul = chunk.find(b"\0")
        if nul >= 0:
            out += chunk[:nul]
            break
        out += chunk
    s = out.decode("utf-8", "replace")
    cache[addr] = s
    return s

ranks = []
for i in range(n):
    e = bytes(inf.read_memory(table + 24 * i, 24))
    host = int.from_bytes(e[0:8], "little")
    exe = int.from_bytes(e[8:16], "little")
    pid = int.from_bytes(e[16:20], "little", signed=True)
    ranks.append((cstr(host), cstr(exe), pid))
print("gdb-walk entries=%d seconds=%.3f" % (len(ranks), time.monotonic() - start))
