//! Section 11 of `compare` (issue 33): the HTML report and `mpir watch`.
//!
//! - The report of a synthetic 4,096-rank job (mpir_report's testkit: a cycle of 3 ranks, the
//!   others blocked by it under 64 solver phases; the documents as `mpir` writes them): the
//!   time to make the page (documents to file), its size, and the time headless Chromium takes
//!   from navigation to the page drawn (`data-rendered`), against the floor of the same bytes
//!   (a page holding the same embedded JSON, parsed by one `JSON.parse` and nothing drawn), then
//!   a search for one rank and "expand all" in the drawn page.
//! - `mpir watch` on a running 64-rank Open MPI job for a fixed number of rounds: the tool's
//!   own CPU per round and peak memory (its summary line), cheap rounds only (no rank looks
//!   stuck: a live job) and with the full read a stuck job triggers; the floor is `mpir stacks`
//!   of the same 4 ranks end to end, the work of one cheap round as a one-shot command.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use mpir_benches::stacks::{compile, running_job};
use mpir_report::testkit::browser::Browser;
use mpir_report::testkit::synthetic::{self, Names};

use super::{Config, mpir_binary, ms, run_to_end, verdict};

const RANKS: u64 = 4096;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Seconds from navigation to `ready` being true.
fn load(b: &Browser, page: &Path, ready: &str) -> f64 {
    let t = Instant::now();
    b.open(page).expect("open the page");
    b.wait_until(ready, Duration::from_secs(60))
        .expect("the page got ready");
    t.elapsed().as_secs_f64()
}

pub(super) fn report(cfg: &Config, dir: &Path) {
    println!("## The HTML report of a 4,096-rank job (synthetic)\n");
    let Ok(b) = Browser::start() else {
        println!("Skipped: no headless Chromium (scripts/ci-chromium.sh).\n");
        return;
    };
    let docs = synthetic::documents(RANKS, &Names::default());
    let mut make = Vec::new();
    let page = dir.join("report-4096.html");
    let mut bytes = 0;
    for _ in 0..cfg.runs {
        let t = Instant::now();
        let mut r = mpir_report::Report::new(vec!["mpir".into(), "report".into()]);
        for d in docs.iter().cloned() {
            r = r.with_document(d).expect("a document of the report");
        }
        bytes = r.write(&page).expect("write the report");
        make.push(t.elapsed().as_secs_f64());
    }
    // The floor: the same embedded data, parsed, nothing drawn.
    let html = std::fs::read_to_string(&page).expect("the report");
    let start = html.find("id=\"mpir-data\">").expect("data") + "id=\"mpir-data\">".len();
    let end = start + html[start..].find("</script>").expect("end of data");
    let floor_page = dir.join("floor-4096.html");
    std::fs::write(
        &floor_page,
        format!(
            "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body data-rendered=\"no\">\
             <script type=\"application/json\" id=\"d\">{}</script><script>\
             JSON.parse(document.getElementById('d').textContent);\
             document.body.setAttribute('data-rendered','yes');</script></body></html>",
            &html[start..end]
        ),
    )
    .expect("write the floor page");
    let ready = "return document.body.getAttribute('data-rendered') === 'yes'";
    let (mut ours, mut floor, mut search, mut expand) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..cfg.runs {
        floor.push(load(&b, &floor_page, ready));
        ours.push(load(&b, &page, ready));
        let s = b
            .eval(
                "var t = performance.now(); var i = document.getElementById('tree-search'); \
                 i.value = '4095'; i.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'})); \
                 return [performance.now() - t, document.getElementById('tree-search-status').textContent]",
            )
            .expect("search");
        assert_eq!(s[1], "rank 4095: 7 frames", "the search found the rank");
        search.push(s[0].as_f64().unwrap_or(0.0) / 1e3);
        let e = b
            .eval(
                "var t = performance.now(); document.getElementById('tree-expand-all').click(); \
                 return [performance.now() - t, document.querySelectorAll('#tree .row').length]",
            )
            .expect("expand all");
        expand.push(e[0].as_f64().unwrap_or(0.0) / 1e3);
    }
    let requests = b.external_requests().expect("the requests");
    assert!(requests.is_empty(), "the page fetched {requests:?}");
    let ours = median(&mut ours);
    println!("| step | ours | floor (same data, parsed only) |\n|---|---|---|");
    println!(
        "| make the page (documents → file) | {} | |",
        ms(median(&mut make))
    );
    println!(
        "| open and draw in headless Chromium | {} | {} |",
        ms(ours),
        ms(median(&mut floor))
    );
    println!(
        "| search a rank (4095) in the drawn page | {} | |",
        ms(median(&mut search))
    );
    println!("| expand all | {} | |", ms(median(&mut expand)));
    println!(
        "\nFile: {:.2} MB. Targets: drawn in under 2 s: {} ({}); under 10 MB: {}.\n",
        bytes as f64 / 1e6,
        verdict(ours < 2.0),
        ms(ours),
        verdict(bytes < 10_000_000)
    );
    drop(b);
    watch(cfg, dir);
}

/// The summary line of a watch: (rounds, full reads, CPU ms per round, peak kB).
fn summary(stderr: &str) -> Option<(u64, u64, f64, u64)> {
    let l = stderr
        .lines()
        .find(|l| l.contains("rounds (") && l.contains("per round"))?;
    let words: Vec<&str> = l.split_whitespace().collect();
    let rounds = words.get(1)?.parse().ok()?;
    let full = words.get(3)?.trim_start_matches('(').parse().ok()?;
    let cpu = l.split("CPU ").nth(1)?.split(" ms").next()?.parse().ok()?;
    let peak = l
        .split("peak memory ")
        .nth(1)?
        .split(" kB")
        .next()?
        .parse()
        .ok()?;
    Some((rounds, full, cpu, peak))
}

fn watch(cfg: &Config, dir: &Path) {
    println!("## `mpir watch` on a 64-rank Open MPI job\n");
    let Some(program) = compile("mpicc.openmpi", dir, "ranks-ompi") else {
        println!("Skipped: no Open MPI.\n");
        return;
    };
    let mpir = mpir_binary();
    let job = running_job(&program, 64);
    let starter = job.0.id().to_string();
    let out = dir.join("watch-bundles");
    let rounds = if cfg.quick { 10 } else { 20 };
    println!("| what | rounds | full reads | CPU per round | peak memory |\n|---|---|---|---|---|");
    // The ranks sleep in a loop: their stacks do not move, so with a low --suspect-after the
    // full read comes (and finds no hang); with the highest, only cheap rounds run.
    for (what, suspect) in [
        ("cheap rounds only", "1000"),
        ("a full read every 2 rounds", "2"),
    ] {
        let o = Command::new(&mpir)
            .args([
                "watch",
                "--starter",
                &starter,
                "--every",
                "0.25",
                "--no-agents",
            ])
            .args(["--suspect-after", suspect, "--for"])
            .arg(format!("{}", rounds / 4))
            .arg("--out")
            .arg(&out)
            .output()
            .expect("run mpir watch");
        let err = String::from_utf8_lossy(&o.stderr);
        match summary(&err) {
            Some((r, f, cpu, peak)) => println!(
                "| {what} | {r} | {f} | {cpu:.1} ms | {:.1} MB |",
                peak as f64 / 1e3
            ),
            None => println!(
                "| {what} | failed: {} | | | |",
                err.lines().last().unwrap_or("")
            ),
        }
    }
    // The floor: one cheap round's work as a one-shot command (4 ranks' stacks).
    let mut pids: Vec<u32> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| mpir_target::live::procfs::parent_of(p) == Some(job.0.id()))
        .collect();
    pids.sort_unstable();
    let pids: Vec<String> = pids.into_iter().take(4).map(|p| p.to_string()).collect();
    if pids.len() == 4 {
        let mut t = Vec::new();
        for _ in 0..cfg.runs {
            let (took, _) = run_to_end(
                Command::new(&mpir).args(["stacks", "--json", "--pid", &pids.join(",")]),
                false,
            );
            t.push(took);
        }
        println!(
            "\nFloor: `mpir stacks --pid` of 4 ranks end to end (process start, symbols, read): {}.\n",
            ms(median(&mut t))
        );
    }
}
