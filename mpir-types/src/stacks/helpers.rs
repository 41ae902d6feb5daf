//! Runtime helper threads (progress threads of the MPI libraries and their runtimes), recognised
//! from frame names only.
//!
//! A heuristic: a thread is a helper when one of its frames' function names matches a
//! signature below. The main thread (tid = pid) is never folded, since it runs the user's code
//! even when it is inside a progress loop. What was folded is always said: the folded node's
//! label names the signature and its rank set and thread count are those of the folded threads.

use super::ThreadStack;

/// A helper thread's signature: how a frame's function name must look, and the label of the
/// folded node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HelperSignature {
    /// The folded node's label.
    pub label: &'static str,
    /// A function name starting with this matches…
    pub prefix: &'static str,
    /// …if it also contains this (case-insensitively; empty: any).
    pub contains: &'static str,
}

/// The built-in signatures.
pub const BUILT_IN_HELPERS: [HelperSignature; 7] = [
    HelperSignature {
        label: "libevent event loop (event_base_loop)",
        prefix: "event_base_loop",
        contains: "",
    },
    HelperSignature {
        label: "Open MPI / PMIx progress thread (progress_engine)",
        prefix: "progress_engine",
        contains: "",
    },
    HelperSignature {
        label: "Open MPI progress thread (opal_progress_threads)",
        prefix: "opal_progress_thread",
        contains: "",
    },
    HelperSignature {
        label: "PMIx progress thread (pmix_progress_threads)",
        prefix: "pmix_progress_thread",
        contains: "",
    },
    HelperSignature {
        label: "UCX async thread (ucs_async_thread)",
        prefix: "ucs_async_thread",
        contains: "",
    },
    HelperSignature {
        label: "MPICH progress thread (MPIR_*progress*)",
        prefix: "MPIR_",
        contains: "progress",
    },
    HelperSignature {
        label: "mpir-rs cooperative channel (libmpir_waits.so)",
        prefix: "mpir_coop_channel_thread",
        contains: "",
    },
];

impl HelperSignature {
    /// Whether a function name matches.
    pub fn matches(&self, function: &str) -> bool {
        function.starts_with(self.prefix)
            && (self.contains.is_empty()
                || function
                    .to_ascii_lowercase()
                    .contains(&self.contains.to_ascii_lowercase()))
    }
}

/// The built-in helper heuristic: the label of the first signature one of the thread's frames
/// matches, unless the thread is its process's main thread (`pid`).
pub fn builtin_helper(thread: &ThreadStack, pid: u32) -> Option<&'static str> {
    if thread.tid == pid {
        return None;
    }
    thread.frames.iter().find_map(|f| {
        let name = f.symbol.as_deref()?;
        BUILT_IN_HELPERS
            .iter()
            .find(|s| s.matches(name))
            .map(|s| s.label)
    })
}
