//! The export of a live process as gdb prints it: gdb attaches, walks `mpir_waits` and its
//! tables with the library's own DWARF (struct mpir_waits_header, _slot, _comm, _request) and
//! prints one `@@` line per item. Independent of any Rust decoder of mpir_waits.h.

use std::process::{Command, Stdio};

/// One used slot.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    pub(crate) generation: u64,
    pub(crate) tid: u32,
    pub(crate) call: u32,
    pub(crate) comm: u64,
    pub(crate) peer: i32,
    pub(crate) tag: i32,
    pub(crate) send_peer: i32,
    pub(crate) root: i32,
    pub(crate) coll_seq: u32,
    pub(crate) nreqs: u32,
    pub(crate) flags: u32,
    pub(crate) reqs: [u32; 2],
    pub(crate) count: u64,
}

/// One communicator entry in use (id not 0).
#[derive(Debug, Clone)]
pub(crate) struct Comm {
    pub(crate) id: u64,
    pub(crate) parent: u64,
    pub(crate) size: i32,
    pub(crate) rank: i32,
    pub(crate) coll_seq: u32,
    pub(crate) kind: u32,
    pub(crate) creations: u32,
    pub(crate) rank0_world: i32,
}

/// One request entry in use (handle not 0), with its index in the table.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    pub(crate) index: u32,
    pub(crate) kind: u32,
    pub(crate) active: u32,
    pub(crate) peer: i32,
    pub(crate) tag: i32,
    pub(crate) comm: u64,
}

/// The header and the entries in use.
#[derive(Debug, Default)]
pub(crate) struct Export {
    pub(crate) magic: String,
    pub(crate) version: u32,
    pub(crate) header_size: u32,
    pub(crate) slot_size: u32,
    pub(crate) comm_size: u32,
    pub(crate) request_size: u32,
    pub(crate) slot_capacity: u32,
    pub(crate) comm_capacity: u32,
    pub(crate) request_capacity: u32,
    pub(crate) abi: u32,
    pub(crate) state: u32,
    pub(crate) disabled: u32,
    pub(crate) world_rank: i32,
    pub(crate) world_size: i32,
    pub(crate) slots_used: u32,
    pub(crate) slots: Vec<Slot>,
    pub(crate) comms: Vec<Comm>,
    pub(crate) requests: Vec<Request>,
}

impl Export {
    /// The slot of the process's main thread (tid = pid), which claims slot 0 in MPI_Init.
    pub(crate) fn main_slot(&self) -> Option<&Slot> {
        self.slots.first()
    }
    pub(crate) fn comm(&self, id: u64) -> Option<&Comm> {
        self.comms.iter().find(|c| c.id == id)
    }
    pub(crate) fn request(&self, index: u32) -> Option<&Request> {
        self.requests.iter().find(|r| r.index == index)
    }
}

/// gdb's Python reads each table as one array value (a CLI `while` loop over the tables took
/// over 10 s a process).
const SCRIPT: &str = r#"
import gdb
gdb.execute("set max-value-size unlimited")
h = gdb.parse_and_eval("mpir_waits")
def table(kind, n):
    a = gdb.parse_and_eval("*(struct mpir_waits_%s (*)[%d]) mpir_waits.%ss" % (kind, n, kind))
    a.fetch_lazy()
    return a
def line(*v):
    print("@@" + " ".join(str(x) for x in v))
line("magic", bytes(int(h["magic"][i]) for i in range(8)).decode("latin-1"))
line("header", *(int(h[f]) for f in ("version", "header_size", "slot_size", "comm_size",
     "request_size", "slot_capacity", "comm_capacity", "request_capacity", "abi", "state",
     "disabled", "world_rank", "world_size", "slots_used")))
used = min(int(h["slots_used"]), int(h["slot_capacity"]))
if used:
    slots = table("slot", used)
    for i in range(used):
        s = slots[i]
        line("slot", *(int(s[f]) for f in ("generation", "tid", "call", "comm", "peer", "tag",
             "send_peer", "root", "coll_seq", "nreqs", "flags")), int(s["reqs"][0]),
             int(s["reqs"][1]), int(s["count"]))
comms = table("comm", int(h["comm_capacity"]))
for i in range(int(h["comm_capacity"])):
    c = comms[i]
    if int(c["id"]) != 0:
        line("comm", *(int(c[f]) for f in ("id", "parent", "size", "rank", "coll_seq", "kind",
             "creations", "rank0_world")))
reqs = table("request", int(h["request_capacity"]))
for i in range(int(h["request_capacity"])):
    r = reqs[i]
    if int(r["handle"]) != 0:
        line("request", i, *(int(r[f]) for f in ("kind", "active", "peer", "tag", "comm")))
line("end")
"#;

fn field<T: std::str::FromStr>(w: &[&str], i: usize, line: &str) -> T {
    w.get(i)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("gdb line {line:?}: field {i}"))
}

/// The export of process `pid`, read by gdb (which stops the process while it reads).
///
/// # Panics
/// When gdb cannot read it.
pub(crate) fn read_export(pid: u32) -> Export {
    let dir = std::env::temp_dir().join(format!("mpir-waits-oracle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join(format!("dump-{pid}.py"));
    std::fs::write(&script, SCRIPT).unwrap();
    let out = Command::new("gdb")
        .args(["-batch", "-nx", "-iex", "set debuginfod enabled off", "-p"])
        .arg(pid.to_string())
        .arg("-x")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .expect("run gdb");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut e = Export::default();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("@@") else {
            continue;
        };
        let w: Vec<&str> = rest.split(' ').collect();
        let f = |i| -> u64 { field(&w, i, line) };
        let g = |i| -> i32 { field(&w, i, line) };
        match w[0] {
            "magic" => e.magic = w.get(1).unwrap_or(&"").to_string(),
            "header" => {
                let v: Vec<u32> = (1..=11).map(|i| f(i) as u32).collect();
                (
                    e.version,
                    e.header_size,
                    e.slot_size,
                    e.comm_size,
                    e.request_size,
                ) = (v[0], v[1], v[2], v[3], v[4]);
                (e.slot_capacity, e.comm_capacity, e.request_capacity) = (v[5], v[6], v[7]);
                (e.abi, e.state, e.disabled) = (v[8], v[9], v[10]);
                (e.world_rank, e.world_size, e.slots_used) = (g(12), g(13), f(14) as u32);
            }
            "slot" => e.slots.push(Slot {
                generation: f(1),
                tid: f(2) as u32,
                call: f(3) as u32,
                comm: f(4),
                peer: g(5),
                tag: g(6),
                send_peer: g(7),
                root: g(8),
                coll_seq: f(9) as u32,
                nreqs: f(10) as u32,
                flags: f(11) as u32,
                reqs: [f(12) as u32, f(13) as u32],
                count: f(14),
            }),
            "comm" => e.comms.push(Comm {
                id: f(1),
                parent: f(2),
                size: g(3),
                rank: g(4),
                coll_seq: f(5) as u32,
                kind: f(6) as u32,
                creations: f(7) as u32,
                rank0_world: g(8),
            }),
            "request" => e.requests.push(Request {
                index: f(1) as u32,
                kind: f(2) as u32,
                active: f(3) as u32,
                peer: g(4),
                tag: g(5),
                comm: f(6),
            }),
            _ => {}
        }
    }
    assert!(
        text.lines().any(|l| l == "@@end"),
        "gdb could not read mpir_waits in pid {pid}: {}\n{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    e
}
