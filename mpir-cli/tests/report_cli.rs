//! The HTML report (`mpir report`, `--html`) checked as a person sees it, in Debian's headless
//! Chromium with the network cut off: the demo job's, a real Open MPI ring's, a synthetic
//! 4,096-rank job's, and one whose names from target memory are HTML and script. Each page must
//! draw (no script error, no Content-Security-Policy violation), fetch nothing, show the verdict,
//! expand its tree to the ranks' frames, draw the wait-for cycle, find ranks and functions, and
//! filter the operations. The expected values come from the jobs' own definitions (the demo's
//! ring of ranks 0-2, the fixture's ring, the synthetic generator's parameters), not from the
//! page. Skipped without Chromium (scripts/ci-chromium.sh installs it), failed under
//! `MPIR_REQUIRE_PEERS=1`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::mpir;
use mpir_report::testkit::browser::{self, Browser, file_url};
use mpir_report::testkit::synthetic::{self, Names};
use mpir_target::testkit::scratch;
use serde_json::Value;

/// Opens `page` and waits for it to be drawn; the time that took.
fn open(b: &Browser, page: &Path) -> Duration {
    let t = Instant::now();
    b.open(page).unwrap();
    let state = b
        .wait_until(
            "return document.body.getAttribute('data-rendered') !== 'no' && document.body.getAttribute('data-rendered')",
            Duration::from_secs(30),
        )
        .unwrap();
    let took = t.elapsed();
    let error = b
        .eval("var e = document.getElementById('report-error'); return e ? e.textContent : null")
        .unwrap();
    assert_eq!(state, "yes", "the page did not draw: {error}");
    took
}

/// Nothing was fetched but the file itself, and no error (a CSP violation is one) was logged.
fn fetched_nothing(b: &Browser, page: &Path) {
    let requests = b.network_requests().unwrap();
    assert_eq!(
        requests,
        vec![file_url(page).unwrap()],
        "requests made by the page"
    );
    assert!(b.external_requests().unwrap().is_empty());
    let errors = b.console_errors().unwrap();
    assert!(errors.is_empty(), "console errors: {errors:?}");
}

fn text(b: &Browser, css: &str) -> String {
    let e = b.find(css).unwrap_or_else(|e| panic!("{css}: {e}"));
    b.text(&e).unwrap()
}

/// The functions of the tree rows a person sees, in order.
fn visible_functions(b: &Browser) -> Vec<String> {
    let v = b
        .eval(
            "return Array.from(document.querySelectorAll('#tree .row')).filter(function (r) { \
             return r.offsetParent !== null; }).map(function (r) { return r.querySelector('.fn').textContent; })",
        )
        .unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Clicks the toggle of the visible row whose function is `function`.
fn expand(b: &Browser, function: &str) {
    let rows = b.find_all("#tree .row").unwrap();
    for r in rows {
        if !b.is_displayed(&r).unwrap() {
            continue;
        }
        let name = b
            .eval_args(
                "return arguments[0].querySelector('.fn').textContent",
                vec![r.to_json()],
            )
            .unwrap();
        if name == function {
            let toggle = b
                .eval_args(
                    "return arguments[0].querySelector('.toggle')",
                    vec![r.to_json()],
                )
                .unwrap();
            let id = browser::ElementId(
                toggle
                    .as_object()
                    .and_then(|o| o.values().next())
                    .and_then(Value::as_str)
                    .unwrap()
                    .to_string(),
            );
            b.click(&id).unwrap();
            return;
        }
    }
    panic!(
        "no visible row {function}; visible: {:?}",
        visible_functions(b)
    );
}

/// The wait-for graph's nodes (data-ranks, state) and edges (from, to, in a cycle).
/// A graph node: (data-ranks, state); an edge: (from, to, in a cycle).
type Graph = (Vec<(String, String)>, Vec<(String, String, bool)>);

fn graph(b: &Browser) -> Graph {
    let v = b
        .eval(
            "var s = document.getElementById('waits-graph'); \
             return [Array.from(s.querySelectorAll('g.node')).map(function (g) { \
               return [g.getAttribute('data-ranks'), g.getAttribute('class').replace('node ', '')]; }), \
             Array.from(s.querySelectorAll('.edge')).map(function (e) { \
               return [e.getAttribute('data-from'), e.getAttribute('data-to'), e.classList.contains('cycle')]; })]",
        )
        .unwrap();
    let nodes = v[0]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n[0].as_str().unwrap().to_string(),
                n[1].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let edges = v[1]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e[0].as_str().unwrap().to_string(),
                e[1].as_str().unwrap().to_string(),
                e[2].as_bool().unwrap(),
            )
        })
        .collect();
    (nodes, edges)
}

/// Types `query` into the input `css` (replacing what was there) and returns the status line
/// `status` once it changed.
fn search(b: &Browser, css: &str, query: &str, status: &str) -> String {
    let input = b.find(css).unwrap();
    b.clear(&input).unwrap();
    b.send_keys(&input, query).unwrap();
    b.send_keys(&input, "\u{E007}").unwrap(); // Enter: no debounce wait
    text(b, status)
}

/// The envelope embedded in a report file, read back as the page reads it.
fn envelope(page: &Path) -> Value {
    let html = std::fs::read_to_string(page).unwrap();
    let start = html.find("id=\"mpir-data\">").unwrap() + "id=\"mpir-data\">".len();
    let end = start + html[start..].find("</script>").unwrap();
    let data: Value = serde_json::from_str(&html[start..end]).unwrap();
    common::validate(&data);
    data
}

#[test]
fn the_demo_job_s_report_reads_as_its_text_does() {
    let Some(b) = browser::require_or_skip() else {
        return;
    };
    let dir = scratch("report-demo");
    let page = dir.join("demo.html");
    let out = mpir()
        .args(["demo", "--json", "--html"])
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The page's data are the documents the tool printed.
    let printed = common::json_doc(&out);
    let data = envelope(&page);
    assert_eq!(data["schema"], "mpir.report/1");
    for part in ["job", "queues", "deadlock"] {
        common::validate(&data["documents"][part]);
        assert_eq!(data["documents"][part], printed[part], "{part}");
    }
    common::validate(&data["documents"]["stacks"]);

    open(&b, &page);
    fetched_nothing(&b, &page);
    // The demo job: ranks 0-2 deadlock in a ring of receives (its definition,
    // mpir-demo/demo/rank.c); rank 3 waits in MPI_Waitall for a send, a wildcard receive.
    assert_eq!(text(&b, "#verdict .verdict-head"), "Deadlock");
    assert!(
        text(&b, "#verdict .cycle-line").starts_with("Cycle 1: 0 \u{2192} 1 \u{2192} 2 \u{2192} 0"),
        "{}",
        text(&b, "#verdict .cycle-line")
    );
    assert!(text(&b, "#command").contains("demo"));

    // The tree, collapsed, then opened by hand down to the ranks' innermost frames.
    b.click(&b.find("#tree-collapse-all").unwrap()).unwrap();
    let shown = visible_functions(&b);
    assert!(!shown.contains(&"MPI_Recv".to_string()), "{shown:?}");
    for f in [
        "_start",
        "__libc_start_main",
        "__libc_start_call_main",
        "main",
    ] {
        expand(&b, f);
    }
    let shown = visible_functions(&b);
    assert!(
        shown.contains(&"MPI_Recv".to_string()) && shown.contains(&"MPI_Waitall".to_string()),
        "{shown:?}"
    );
    expand(&b, "MPI_Recv");
    let leaf = b
        .eval(
            "var r = Array.from(document.querySelectorAll('#tree .row')).filter(function (r) { \
             return r.offsetParent !== null && r.querySelector('.class'); }); \
             return r.map(function (x) { return x.querySelector('.fn').textContent + ' ' + x.querySelector('.class').textContent; })",
        )
        .unwrap();
    assert!(
        leaf.as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().ends_with("class of 3: [0-2]")),
        "{leaf}"
    );

    // The wait-for graph: the cycle 0 -> 1 -> 2 -> 0 in red, rank 3 blocked by it.
    let (nodes, edges) = graph(&b);
    for r in ["0", "1", "2"] {
        assert!(
            nodes.contains(&(r.to_string(), "cycle".to_string())),
            "{nodes:?}"
        );
    }
    assert!(
        nodes.contains(&("3".to_string(), "blocked".to_string())),
        "{nodes:?}"
    );
    for (a, z) in [("0", "1"), ("1", "2"), ("2", "0")] {
        assert!(
            edges.contains(&(a.into(), z.into(), true)),
            "{a}->{z} in {edges:?}"
        );
    }
    assert_eq!(edges.iter().filter(|e| e.2).count(), 3, "{edges:?}");

    // Search by rank and by function.
    let status = search(&b, "#tree-search", "3", "#tree-search-status");
    assert!(status.starts_with("rank 3: "), "{status}");
    let marked = b
        .eval("return Array.from(document.querySelectorAll('#tree .row.match .fn')).map(function (f) { return f.textContent; })")
        .unwrap();
    assert!(
        marked
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "MPI_Waitall"),
        "{marked}"
    );
    assert!(
        !marked.as_array().unwrap().iter().any(|f| f == "MPI_Recv"),
        "{marked}"
    );
    let status = search(&b, "#tree-search", "waitall", "#tree-search-status");
    assert_eq!(status, "1 frame match");

    // Rank 3's operations: its send to 0, its wildcard receive, the unexpected message.
    let status = search(&b, "#ops-filter", "rank:3", "#ops-status");
    assert_eq!(status, "3 operations");
    let ranks = b
        .eval("return Array.from(document.querySelectorAll('#ops-table tbody tr')).map(function (r) { return r.dataset.rank; })")
        .unwrap();
    assert_eq!(ranks, serde_json::json!(["3", "3", "3"]));
}

/// `mpir report` of a hung job of `stack` into `page`: exit status 3, the job left as it
/// was; the page's data.
fn hung_report(stack: &common::stock::Stack, job: &common::Job, page: &Path) -> Value {
    let out = mpir()
        .args(["report", "--starter", &job.starter().to_string(), "-o"])
        .arg(page)
        .args(&stack.extra)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::stock::untouched(job);
    envelope(page)
}

#[test]
fn a_real_open_mpi_ring_s_report() {
    let Some(stack) = common::stock::open_mpi_stock() else {
        return;
    };
    let Some(b) = browser::require_or_skip() else {
        return;
    };
    let dir = scratch("report-ompi-ring");
    let program = common::stock::build(&stack, &dir);
    let job = common::stock::start(&stack, &dir, &program, "ring", 4);
    let page = dir.join("ring.html");
    let data = hung_report(&stack, &job, &page);
    for part in ["job", "stacks", "deadlock"] {
        common::validate(&data["documents"][part]);
    }
    open(&b, &page);
    fetched_nothing(&b, &page);
    // tests/fixtures/deadlock.c's ring: every rank in MPI_Recv from the next.
    assert_eq!(text(&b, "#verdict .verdict-head"), "Deadlock");
    let (nodes, edges) = graph(&b);
    for r in 0..4 {
        assert!(
            nodes.contains(&(r.to_string(), "cycle".into())),
            "{nodes:?}"
        );
        let next = (r + 1) % 4;
        assert!(
            edges.contains(&(r.to_string(), next.to_string(), true)),
            "{edges:?}"
        );
    }
    let status = search(&b, "#tree-search", "MPI_Recv", "#tree-search-status");
    assert!(
        status.ends_with("match") && !status.starts_with("no"),
        "{status}"
    );
    let marked = b
        .eval("return Array.from(document.querySelectorAll('#tree .row.match')).map(function (r) { return r.querySelector('.ranks').textContent; })")
        .unwrap();
    assert!(
        marked.as_array().unwrap().iter().any(|r| r == "[0-3]"),
        "{marked}"
    );
    let status = search(&b, "#ops-filter", "rank:2", "#ops-status");
    assert_eq!(status, "1 operation", "rank 2's receive from 3");
    let row = text(&b, "#ops-table tbody tr");
    assert!(row.contains("receive") && row.contains("MPI_Recv"), "{row}");
    drop(job);

    // The fixture's wildcard knot: rank 0 receives from MPI_ANY_SOURCE on "wild", every other
    // rank from rank 0; nobody sends.
    let job = common::stock::start(&stack, &dir, &program, "wildcard", 3);
    let page = dir.join("knot.html");
    hung_report(&stack, &job, &page);
    open(&b, &page);
    fetched_nothing(&b, &page);
    let line = text(&b, "#verdict .cycle-line");
    assert!(
        line.contains("ranks 0, 1, 2; a knot") && line.ends_with("on wild"),
        "{line}"
    );
    let (_, edges) = graph(&b);
    for (a, z) in [("0", "1"), ("0", "2"), ("1", "0"), ("2", "0")] {
        assert!(
            edges.contains(&(a.into(), z.into(), true)),
            "{a}->{z} in {edges:?}"
        );
    }
}

#[test]
fn a_4096_rank_report_stays_small_and_usable() {
    let Some(b) = browser::require_or_skip() else {
        return;
    };
    let ranks = 4096;
    let docs = synthetic::documents(ranks, &Names::default());
    for d in &docs {
        common::validate(d);
    }
    let mut report = mpir_report::Report::new(vec!["mpir".into(), "report".into()]);
    for d in docs {
        report = report.with_document(d).unwrap();
    }
    let dir = scratch("report-4096");
    let page = dir.join("big.html");
    let bytes = report.write(&page).unwrap();
    assert!(bytes < 10_000_000, "{bytes} bytes");
    let took = open(&b, &page);
    eprintln!("4096-rank report: {bytes} bytes, drawn in {took:?} (benchmarked in benches)");
    fetched_nothing(&b, &page);
    assert_eq!(text(&b, "#verdict .verdict-head"), "Deadlock");
    // Grouped: the cycle's 3 ranks one by one, the 4,093 blocked ranks by call site (64
    // phases, synthetic.rs), so the graph stays legible.
    let (nodes, _) = graph(&b);
    assert_eq!(nodes.iter().filter(|n| n.1 == "cycle").count(), 3);
    assert_eq!(
        nodes.iter().filter(|n| n.1 == "blocked").count(),
        64,
        "{}",
        nodes.len()
    );
    let status = search(&b, "#tree-search", "4095", "#tree-search-status");
    // 4095 % 64 = 63: root, _start, __libc_start_main, main, solver_phase_63, MPI_Waitall,
    // opal_progress.
    assert_eq!(status, "rank 4095: 7 frames");
    let status = search(&b, "#ops-filter", "", "#ops-status");
    assert!(
        status.starts_with("4096 operations (the first 500 shown"),
        "{status}"
    );
    let status = search(&b, "#ops-filter", "rank:4095", "#ops-status");
    assert_eq!(status, "1 operation");
    assert_eq!(
        text(&b, "#classes h3"),
        "65 equivalence classes",
        "the cycle's and the 64 phases'"
    );
}

#[test]
fn names_from_target_memory_are_shown_as_text_never_run() {
    let Some(b) = browser::require_or_skip() else {
        return;
    };
    let hostile = Names {
        function: "<img src=x onerror=\"window.__pwned='img'\">solve</script><script>window.__pwned='script'</script>".into(),
        file: "\"><svg onload=window.__pwned='svg'><!--/a.c".into(),
        module: "javascript:window.__pwned='href'\u{2028}</style><style>body{display:none}</style>".into(),
        host: "<iframe src=\"http://evil.invalid/\"></iframe>".into(),
        comm: "${alert(1)}{{7*7}}<b onmouseover=window.__pwned='b'>comm</b>".into(),
    };
    let mut report = mpir_report::Report::new(vec!["mpir".into(), "<script>x</script>".into()])
        .with_title("</title><script>window.__pwned='title'</script>")
        .with_note(hostile.function.clone());
    for d in synthetic::documents(16, &hostile) {
        common::validate(&d);
        report = report.with_document(d).unwrap();
    }
    let dir = scratch("report-hostile");
    let page = dir.join("hostile.html");
    report.write(&page).unwrap();
    open(&b, &page);
    fetched_nothing(&b, &page);
    let state = b
        .eval(
            "return {pwned: window.__pwned === undefined ? null : window.__pwned, \
             scripts: document.scripts.length, imgs: document.images.length, \
             iframes: document.getElementsByTagName('iframe').length, \
             foreign: document.querySelectorAll('#app script, #app img, #app iframe, #app style, #app b, #app foreignObject').length, \
             hidden: getComputedStyle(document.body).display}",
        )
        .unwrap();
    assert_eq!(
        state,
        serde_json::json!({"pwned": null, "scripts": 2, "imgs": 0, "iframes": 0, "foreign": 0, "hidden": "block"}),
        "the page ran or parsed a name"
    );
    // The names are there, verbatim, as text.
    let shown = b
        .eval_args(
            "var t = document.body.textContent; \
             return Array.prototype.map.call(arguments, function (s) { return t.indexOf(s) >= 0; })",
            vec![
                Value::from(hostile.function.clone()),
                Value::from(hostile.host.clone()),
                Value::from(hostile.comm.clone()),
            ],
        )
        .unwrap();
    assert_eq!(shown, serde_json::json!([true, true, true]));
    // Searching for one finds it in the tree.
    let status = search(&b, "#tree-search", "onerror", "#tree-search-status");
    assert_eq!(status, "1 frame match");
    let title = b.eval("return document.title").unwrap();
    assert_eq!(title, "</title><script>window.__pwned='title'</script>");
}

#[test]
fn saved_documents_make_the_same_report() {
    let dir = scratch("report-from");
    let demo = dir.join("demo.json");
    let out = mpir().args(["demo", "--json"]).output().unwrap();
    assert!(out.status.success());
    let printed = common::json_doc(&out);
    std::fs::write(&demo, &out.stdout).unwrap();
    let page = dir.join("from.html");
    let out = mpir()
        .args(["report", "--from"])
        .arg(&demo)
        .arg("-o")
        .arg(&page)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = envelope(&page);
    for part in ["job", "queues", "deadlock"] {
        assert_eq!(data["documents"][part], printed[part], "{part}");
    }
    // Not a document: one clear line.
    std::fs::write(dir.join("junk.json"), "{\"schema\": \"other/1\"}").unwrap();
    let out = mpir()
        .args(["report", "--from"])
        .arg(dir.join("junk.json"))
        .arg("-o")
        .arg(dir.join("junk.html"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not \"other/1\""), "{err}");
    assert!(!dir.join("junk.html").exists());
}

#[test]
fn a_report_from_the_cores_of_the_demo_job() {
    if !mpir_target::testkit::have("gcore") {
        mpir_target::testkit::skip("needs gdb's gcore");
        return;
    }
    let dir = scratch("report-cores");
    let starter = mpir_demo::starter().unwrap();
    let mut job = std::process::Command::new(starter)
        .args(["-n", "4", "--lifetime", "60"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(job.stdout.take().unwrap()));
    // "rank R pid P ready", in whatever order; the cores are given in rank order (without
    // a starter's core they are numbered by position).
    let mut ranked = Vec::new();
    while ranked.len() < 4 {
        let l = lines.next().unwrap().unwrap();
        if let ["rank", r, "pid", p, "ready"] = l.split_whitespace().collect::<Vec<_>>()[..] {
            ranked.push((r.parse::<u32>().unwrap(), p.to_string()));
        }
    }
    ranked.sort();
    let pids: Vec<String> = ranked.into_iter().map(|(_, p)| p).collect();
    let mut cores = Vec::new();
    for p in &pids {
        let prefix = dir.join("core");
        let ok = std::process::Command::new("gcore")
            .arg("-o")
            .arg(&prefix)
            .arg(p)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        assert!(ok, "gcore {p}");
        cores.push(dir.join(format!("core.{p}")));
    }
    let _ = job.kill();
    let _ = job.wait();
    let page = dir.join("cores.html");
    let out = mpir()
        .args(["report", "-o"])
        .arg(&page)
        .arg("--core")
        .args(&cores)
        .output()
        .unwrap();
    // One instant: the demo's ring of ranks 0-2 is a potential deadlock (exit 3).
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = envelope(&page);
    let docs = &data["documents"];
    assert_eq!(docs["deadlock"]["verdict"], "potential_deadlock");
    assert_eq!(
        docs["deadlock"]["cycles"][0]["ranks"],
        serde_json::json!([0, 1, 2])
    );
    assert_eq!(docs["stacks"]["source"], "cores");
    assert_eq!(docs["stacks"]["coverage"]["read"], 4);
}
