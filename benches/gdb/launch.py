# gdb's way to launch an MPIR job under control, for comparison with mpir-rs:
#   gdb -nx -batch -x benches/gdb/launch.py --args orterun -n 4 ./app
# Stops at the program's entry point (after its libraries are mapped), sets
# MPIR_being_debugged, breaks on MPIR_Breakpoint, reads MPIR_proctable_size at the spawn event,
# resets MPIR_being_debugged and detaches. The caller times the whole job.
import re
import gdb

gdb.execute("set pagination off")
gdb.execute("set startup-with-shell off")
gdb.execute("set detach-on-fork on")
gdb.execute("starti", to_string=True)
entry = int(re.search(r"Entry point: (0x[0-9a-f]+)", gdb.execute("info files", to_string=True)).group(1), 16)
gdb.execute("tbreak *%d" % entry, to_string=True)
gdb.execute("continue", to_string=True)
gdb.execute("set var *(int *)&MPIR_being_debugged = 1")
gdb.execute("break MPIR_Breakpoint", to_string=True)
gdb.execute("continue", to_string=True)
n = int(gdb.parse_and_eval("*(int *)&MPIR_proctable_size"))
gdb.execute("delete")
gdb.execute("set var *(int *)&MPIR_being_debugged = 0")
gdb.execute("detach", to_string=True)
gdb.write("gdb-launch entries=%d\n" % n, gdb.STDERR)
