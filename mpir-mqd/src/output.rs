//! What a vendor DLL prints on its own (Open MPI's prints "WARNING: … unable to find debugging
//! information about the "opal_list_item_t" type" to stderr once per process and call):
//! collected line by line, deduplicated and counted, bounded, so that a tool reports it once in
//! its notes instead of spraying it on the user's terminal.
//!
//! The out-of-process host reads its helper's stderr into an [`OutputLog`]. The in-process host
//! cannot: the DLL writes to the tool's own file descriptor 2, and redirecting that would also
//! swallow the tool's and its other threads' messages.

/// Most distinct lines kept; more are counted in [`OutputLog::other_lines`].
pub const MAX_DISTINCT_LINES: usize = 32;
/// Longest line kept, in bytes; longer lines are cut (and marked with `…`).
pub const MAX_LINE_BYTES: usize = 1024;

/// One distinct line a DLL printed, and how many times.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrintedLine {
    /// The line (without its newline; invalid UTF-8 replaced; cut at [`MAX_LINE_BYTES`]).
    pub text: String,
    /// How many times it was printed.
    pub count: u64,
}

impl std::fmt::Display for PrintedLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.count > 1 {
            write!(f, "{} (printed {} times)", self.text, self.count)
        } else {
            f.write_str(&self.text)
        }
    }
}

/// Lines collected from a stream, deduplicated, counted and bounded.
#[derive(Debug, Default, Clone)]
pub struct OutputLog {
    lines: Vec<PrintedLine>,
    /// Bytes of the line not yet ended (at most [`MAX_LINE_BYTES`] kept).
    partial: Vec<u8>,
    partial_cut: bool,
    other_lines: u64,
}

impl OutputLog {
    /// An empty log.
    pub fn new() -> Self {
        OutputLog::default()
    }

    /// Adds bytes as read from the stream (any split).
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.end_line();
            } else if self.partial.len() < MAX_LINE_BYTES {
                self.partial.push(b);
            } else {
                self.partial_cut = true;
            }
        }
    }

    /// Ends the stream: a last line without a newline counts too.
    pub fn finish(&mut self) {
        if !self.partial.is_empty() {
            self.end_line();
        }
    }

    fn end_line(&mut self) {
        let mut text = String::from_utf8_lossy(&self.partial)
            .trim_end()
            .to_string();
        if self.partial_cut {
            text.push('…');
        }
        self.partial.clear();
        self.partial_cut = false;
        if text.is_empty() {
            return;
        }
        if let Some(l) = self.lines.iter_mut().find(|l| l.text == text) {
            l.count += 1;
        } else if self.lines.len() < MAX_DISTINCT_LINES {
            self.lines.push(PrintedLine { text, count: 1 });
        } else {
            self.other_lines += 1;
        }
    }

    /// Adds another log's lines (counts summed), e.g. the helper of each of several reads.
    pub fn merge(&mut self, other: &OutputLog) {
        for l in &other.lines {
            if let Some(mine) = self.lines.iter_mut().find(|m| m.text == l.text) {
                mine.count += l.count;
            } else if self.lines.len() < MAX_DISTINCT_LINES {
                self.lines.push(l.clone());
            } else {
                self.other_lines += l.count;
            }
        }
        self.other_lines += other.other_lines;
    }

    /// Whether nothing was printed.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.other_lines == 0
    }

    /// The distinct lines, in order of first appearance.
    pub fn lines(&self) -> &[PrintedLine] {
        &self.lines
    }

    /// Lines not kept because [`MAX_DISTINCT_LINES`] distinct ones were already.
    pub fn other_lines(&self) -> u64 {
        self.other_lines
    }

    /// The log as notes for a report: each distinct line once with its count, and what was
    /// left out.
    pub fn notes(&self) -> Vec<String> {
        let mut out: Vec<String> = self.lines.iter().map(ToString::to_string).collect();
        if self.other_lines > 0 {
            out.push(format!(
                "({} more lines, past {MAX_DISTINCT_LINES} distinct ones, not kept)",
                self.other_lines
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_lines_are_counted_once_whatever_the_splits() {
        let mut log = OutputLog::new();
        let text = b"WARNING: no type\nWARNING: no type\nother\r\nWARNING: no type\nlast";
        for chunk in text.chunks(3) {
            log.push_bytes(chunk);
        }
        log.finish();
        let got: Vec<(String, u64)> = log
            .lines()
            .iter()
            .map(|l| (l.text.clone(), l.count))
            .collect();
        assert_eq!(
            got,
            [
                ("WARNING: no type".to_string(), 3),
                ("other".to_string(), 1),
                ("last".to_string(), 1)
            ]
        );
        assert_eq!(log.notes()[0], "WARNING: no type (printed 3 times)");
    }

    #[test]
    fn logs_merge_by_line() {
        let mut a = OutputLog::new();
        a.push_bytes(b"x\nx\ny\n");
        let mut b = OutputLog::new();
        b.push_bytes(b"x\nz\n");
        a.merge(&b);
        let got: Vec<(&str, u64)> = a.lines().iter().map(|l| (&*l.text, l.count)).collect();
        assert_eq!(got, [("x", 3), ("y", 1), ("z", 1)]);
        assert!(OutputLog::new().is_empty() && !a.is_empty());
    }

    #[test]
    fn hostile_output_is_bounded() {
        let mut log = OutputLog::new();
        // A 1 MiB line without a newline, then thousands of distinct lines, invalid UTF-8.
        log.push_bytes(&vec![b'x'; 1 << 20]);
        log.push_bytes(b"\n");
        for i in 0..10_000 {
            log.push_bytes(format!("line {i}\n").as_bytes());
        }
        log.push_bytes(b"\xff\xfe\n\n\n");
        log.finish();
        assert_eq!(log.lines().len(), MAX_DISTINCT_LINES);
        let first = &log.lines()[0].text;
        assert!(first.ends_with('…') && first.len() <= MAX_LINE_BYTES + 3);
        assert_eq!(
            log.other_lines(),
            10_000 + 1 - (MAX_DISTINCT_LINES as u64 - 1)
        );
        assert!(log.notes().last().unwrap().contains("not kept"));
    }
}
