//! The job's table; its document is [`mpir_json::job`]'s.

pub(crate) use mpir_json::job::*;

pub(crate) fn print(out: &JobOut<'_>, json: bool) -> anyhow::Result<()> {
    use std::io::Write;
    if json {
        crate::write_out(|w| write_json(out, w));
        return Ok(());
    }
    let starter = match (out.starter.pid, &out.starter.launcher) {
        (Some(p), Some(l)) => format!("starter pid {p} ({l})"),
        (Some(p), None) => format!("starter pid {p}"),
        _ => "starter (from a core file)".into(),
    };
    crate::write_out(|w| {
        writeln!(
            w,
            "{starter}, {} ranks, interface {}, layout from {}",
            out.ranks.len(),
            out.interface,
            out.layout
        )?;
        writeln!(
            w,
            "{:>6}  {:<16}  {:>8}  {:<13}  executable",
            "rank", "host", "pid", "control"
        )?;
        for r in out.ranks.iter() {
            write!(
                w,
                "{:>6}  {:<16}  {:>8}  {:<13}  ",
                r.rank,
                r.host.unwrap_or("?"),
                r.pid,
                r.control,
            )?;
            match &r.container {
                // The rank's own program, and where it was found.
                Some(c) => match &c.runtime {
                    Some(runtime) => {
                        let runtime = std::path::Path::new(runtime)
                            .file_name()
                            .map_or_else(|| runtime.clone(), |n| n.to_string_lossy().into());
                        write!(
                            w,
                            "{} (in a container under {runtime} pid {}",
                            c.executable, c.table_pid
                        )?;
                        match c.ns_pid {
                            Some(n) => writeln!(w, "; pid {n} inside)")?,
                            None => writeln!(w, ")")?,
                        }
                    }
                    None => writeln!(
                        w,
                        "{} (pid {} in the starter's PID namespace)",
                        c.executable, c.table_pid
                    )?,
                },
                None => writeln!(w, "{}", r.executable.unwrap_or("?"))?,
            }
        }
        for p in &out.problems {
            writeln!(w, "problem: {p}")?;
        }
        for n in &out.notes {
            writeln!(w, "note: {n}")?;
        }
        Ok(())
    });
    Ok(())
}
