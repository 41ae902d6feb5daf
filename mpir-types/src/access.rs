//! Why the kernel refused this tool access to a process: the facts that decide `ptrace`
//! access on Linux, and the one typed reason (with its remedy) drawn from them.
//!
//! The kernel's check (`__ptrace_may_access` and the LSM hooks) looks at, in order: whether the
//! target is already traced (for an attach), the user ids of both sides, the tool's
//! `CAP_SYS_PTRACE` in the target's user namespace, the target's dumpable flag, and then
//! Yama's `ptrace_scope`. A seccomp filter in the tool's own process can refuse the system
//! call before the kernel looks at any of that. [`AccessFacts`] holds what `/proc` tells of
//! each; [`AccessFacts::diagnose`] turns them into one [`AccessDenial`], which every command,
//! JSON document and binding reports with the same [`code`](AccessDenial::code) and text.
//! Gathering the facts is I/O and lives in `mpir-target`; the decision is here, so that it is
//! tested on every combination without a kernel that has them.

use std::fmt;

/// What `/proc` told about the tool, the target and the system when an access was refused.
/// Each field is `None` when it could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct AccessFacts {
    /// The refused process.
    pub pid: u32,
    /// `/proc/sys/kernel/yama/ptrace_scope`; `None` without Yama.
    pub yama_scope: Option<u8>,
    /// The tool's effective capability set holds `CAP_SYS_PTRACE`.
    pub tool_cap_sys_ptrace: Option<bool>,
    /// The tool's real and effective uid.
    pub tool_uid: Option<(u32, u32)>,
    /// The tool runs under a seccomp filter (`Seccomp: 2` in its status).
    pub tool_seccomp_filter: Option<bool>,
    /// The tool's `no_new_privs` flag.
    pub tool_no_new_privs: Option<bool>,
    /// The target's real, effective and saved uid.
    pub target_uids: Option<(u32, u32, u32)>,
    /// Whether the target is dumpable (`PR_SET_DUMPABLE`): known from the owner of its
    /// `/proc/PID` directory, which the kernel sets to root for a non-dumpable process.
    pub target_dumpable: Option<bool>,
    /// The process tracing the target, other than this tool: its pid and command name.
    pub tracer: Option<(u32, String)>,
    /// The target is a descendant of the tool (what Yama scope 1 allows).
    pub target_is_descendant: Option<bool>,
    /// The target lives in another user namespace than the tool's, and not one the tool's
    /// namespace owns.
    pub other_user_namespace: Option<bool>,
    /// The target has exited (a zombie) or is gone.
    pub exited: bool,
}

/// Why access to a process was refused: one reason, the first the kernel would have hit.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "code"))]
#[non_exhaustive]
pub enum AccessDenial {
    /// Another process traces it (a debugger at a prompt, another tool): a process has one
    /// tracer at most.
    TracedBy {
        /// The tracer's pid.
        pid: u32,
        /// The tracer's command name (`/proc/PID/comm`), `?` when unreadable.
        name: String,
    },
    /// It runs as another user, and this tool has no `CAP_SYS_PTRACE`.
    OtherUser {
        /// This tool's effective uid.
        tool_uid: u32,
        /// The target's effective uid.
        target_uid: u32,
    },
    /// It made itself non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`, a setuid or setgid
    /// program, a changed credential): only a tool with `CAP_SYS_PTRACE` may read it.
    NotDumpable,
    /// Yama's `ptrace_scope` forbids it.
    Yama {
        /// The scope: 1 (descendants only), 2 (`CAP_SYS_PTRACE` only), 3 (no attach at all).
        scope: u8,
    },
    /// A seccomp filter in this tool's process refused the system call (a container
    /// runtime's or a sandbox's profile).
    Seccomp,
    /// It lives in a user namespace this tool has no capabilities in (a rootless container).
    UserNamespace,
    /// The process had exited.
    Exited,
    /// Refused for a reason the facts do not show (another LSM: SELinux, AppArmor…).
    Unexplained {
        /// The error the system returned.
        errno: String,
    },
}

impl AccessDenial {
    /// A stable code for the reason (JSON's `code`, the C API's and Python's), the same in
    /// every command.
    pub fn code(&self) -> &'static str {
        match self {
            AccessDenial::TracedBy { .. } => "traced_by",
            AccessDenial::OtherUser { .. } => "other_user",
            AccessDenial::NotDumpable => "not_dumpable",
            AccessDenial::Yama { .. } => "yama",
            AccessDenial::Seccomp => "seccomp",
            AccessDenial::UserNamespace => "user_namespace",
            AccessDenial::Exited => "exited",
            AccessDenial::Unexplained { .. } => "unexplained",
        }
    }

    /// Whether waiting could change it (another tracer may let go); every other denial is
    /// permanent for this tool, and asking again is pointless.
    pub fn is_transient(&self) -> bool {
        matches!(self, AccessDenial::TracedBy { .. })
    }

    /// What the user can do about it, as one or two sentences.
    pub fn remedy(&self) -> String {
        match self {
            AccessDenial::TracedBy { pid, name } => {
                format!("detach {name} (pid {pid}) from it, or let it finish, and ask again")
            }
            AccessDenial::OtherUser { target_uid, .. } => {
                format!("run the tool as uid {target_uid} (the job's user), or with CAP_SYS_PTRACE")
            }
            AccessDenial::NotDumpable => "run the tool with CAP_SYS_PTRACE, or preload \
                 libmpir_waits.so into the job (`mpir preload` prints its path) so that its \
                 ranks answer for themselves over the cooperative channel"
                .into(),
            AccessDenial::Yama { scope: 1 } => "start the job under the tool (`mpir launch`), \
                 so that its ranks are the tool's descendants; or preload libmpir_waits.so \
                 into the job, whose ranks then grant this tool access for the read \
                 (PR_SET_PTRACER) or answer for themselves; or, as an administrator, set \
                 kernel.yama.ptrace_scope=0"
                .into(),
            AccessDenial::Yama { scope: 2 } => "run the tool with CAP_SYS_PTRACE, or preload \
                 libmpir_waits.so into the job so that its ranks answer for themselves over \
                 the cooperative channel"
                .into(),
            AccessDenial::Yama { .. } => "no process may be traced until reboot: preload \
                 libmpir_waits.so into the job (`mpir preload` prints its path) so that its \
                 ranks answer for themselves over the cooperative channel"
                .into(),
            AccessDenial::Seccomp => "run the tool outside the seccomp profile (a container \
                 started with --cap-add SYS_PTRACE or an unconfined profile), or preload \
                 libmpir_waits.so into the job so that its ranks answer for themselves"
                .into(),
            AccessDenial::UserNamespace => "run the tool inside the job's container (the \
                 same user namespace), or with CAP_SYS_PTRACE over it"
                .into(),
            AccessDenial::Exited => "nothing: the process is gone".into(),
            AccessDenial::Unexplained { .. } => "check the security modules' logs (SELinux, \
                 AppArmor: `ptrace` denials), or preload libmpir_waits.so into the job so \
                 that its ranks answer for themselves"
                .into(),
        }
    }
}

impl fmt::Display for AccessDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccessDenial::TracedBy { pid, name } => {
                write!(f, "already traced by pid {pid} ({name})")
            }
            AccessDenial::OtherUser {
                tool_uid,
                target_uid,
            } => write!(
                f,
                "it runs as uid {target_uid}, this tool as uid {tool_uid} without CAP_SYS_PTRACE"
            ),
            AccessDenial::NotDumpable => f.write_str(
                "it is not dumpable (PR_SET_DUMPABLE 0 or changed credentials) and this tool \
                 has no CAP_SYS_PTRACE",
            ),
            AccessDenial::Yama { scope: 1 } => f.write_str(
                "Yama ptrace_scope 1: only descendants of this tool may be traced, and it is \
                 not one",
            ),
            AccessDenial::Yama { scope: 2 } => {
                f.write_str("Yama ptrace_scope 2: only a tool with CAP_SYS_PTRACE may trace")
            }
            AccessDenial::Yama { scope } => {
                write!(f, "Yama ptrace_scope {scope}: no process may be traced")
            }
            AccessDenial::Seccomp => {
                f.write_str("a seccomp filter on this tool refused the system call")
            }
            AccessDenial::UserNamespace => {
                f.write_str("it lives in a user namespace where this tool has no capabilities")
            }
            AccessDenial::Exited => f.write_str("the process has exited"),
            AccessDenial::Unexplained { errno } => write!(
                f,
                "{errno}, for a reason uid, capabilities, dumpable, Yama and seccomp do not \
                 explain (another security module?)"
            ),
        }
    }
}

impl AccessFacts {
    /// Facts about `pid`, all unknown.
    pub fn new(pid: u32) -> Self {
        AccessFacts {
            pid,
            ..AccessFacts::default()
        }
    }

    /// The one reason the kernel refused, checked in the kernel's order; `errno` is the
    /// error's text, kept when the facts explain nothing. `attach` says whether the refused
    /// request was an attach (an existing tracer refuses attaches, not memory reads).
    pub fn diagnose(&self, errno: &str, attach: bool) -> AccessDenial {
        if self.exited {
            return AccessDenial::Exited;
        }
        if attach && let Some((pid, name)) = &self.tracer {
            return AccessDenial::TracedBy {
                pid: *pid,
                name: name.clone(),
            };
        }
        let privileged = self.tool_cap_sys_ptrace == Some(true);
        if !privileged
            && let (Some((_, tool)), Some((r, e, s))) = (self.tool_uid, self.target_uids)
            && (r != tool || e != tool || s != tool)
        {
            return AccessDenial::OtherUser {
                tool_uid: tool,
                target_uid: e,
            };
        }
        if self.other_user_namespace == Some(true) && !privileged {
            return AccessDenial::UserNamespace;
        }
        if self.target_dumpable == Some(false) && !privileged {
            return AccessDenial::NotDumpable;
        }
        match self.yama_scope {
            Some(3) => return AccessDenial::Yama { scope: 3 },
            Some(2) if !privileged => return AccessDenial::Yama { scope: 2 },
            Some(1) if !privileged && self.target_is_descendant != Some(true) => {
                return AccessDenial::Yama { scope: 1 };
            }
            _ => {}
        }
        if self.tool_seccomp_filter == Some(true) {
            return AccessDenial::Seccomp;
        }
        AccessDenial::Unexplained {
            errno: errno.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(pid: u32) -> AccessFacts {
        AccessFacts {
            pid,
            yama_scope: None,
            tool_cap_sys_ptrace: Some(false),
            tool_uid: Some((1000, 1000)),
            tool_seccomp_filter: Some(false),
            tool_no_new_privs: Some(false),
            target_uids: Some((1000, 1000, 1000)),
            target_dumpable: Some(true),
            tracer: None,
            target_is_descendant: Some(false),
            other_user_namespace: Some(false),
            exited: false,
        }
    }

    #[test]
    fn each_fact_alone_gives_its_reason() {
        let base = plain(7);
        assert_eq!(
            base.diagnose("EPERM", true),
            AccessDenial::Unexplained {
                errno: "EPERM".into()
            }
        );
        let traced = AccessFacts {
            tracer: Some((99, "gdb".into())),
            ..base.clone()
        };
        assert_eq!(
            traced.diagnose("EPERM", true),
            AccessDenial::TracedBy {
                pid: 99,
                name: "gdb".into()
            }
        );
        let other = AccessFacts {
            target_uids: Some((1001, 1001, 1001)),
            ..base.clone()
        };
        assert_eq!(
            other.diagnose("EPERM", true),
            AccessDenial::OtherUser {
                tool_uid: 1000,
                target_uid: 1001
            }
        );
        let setuid = AccessFacts {
            target_uids: Some((1000, 0, 0)),
            ..base.clone()
        };
        assert_eq!(setuid.diagnose("EPERM", true).code(), "other_user");
        let undumpable = AccessFacts {
            target_dumpable: Some(false),
            ..base.clone()
        };
        assert_eq!(
            undumpable.diagnose("EPERM", false),
            AccessDenial::NotDumpable
        );
        for scope in 1..=3u8 {
            let yama = AccessFacts {
                yama_scope: Some(scope),
                ..base.clone()
            };
            assert_eq!(yama.diagnose("EPERM", true), AccessDenial::Yama { scope });
        }
        let seccomp = AccessFacts {
            tool_seccomp_filter: Some(true),
            ..base.clone()
        };
        assert_eq!(seccomp.diagnose("EPERM", true), AccessDenial::Seccomp);
        let ns = AccessFacts {
            other_user_namespace: Some(true),
            ..base.clone()
        };
        assert_eq!(ns.diagnose("EPERM", true), AccessDenial::UserNamespace);
        let gone = AccessFacts {
            exited: true,
            ..base
        };
        assert_eq!(gone.diagnose("ESRCH", true), AccessDenial::Exited);
    }

    #[test]
    fn what_the_kernel_allows_is_not_blamed() {
        let base = plain(7);
        // Scope 1 allows descendants; scope 2 and dumpable allow CAP_SYS_PTRACE.
        let child = AccessFacts {
            yama_scope: Some(1),
            target_is_descendant: Some(true),
            tool_seccomp_filter: Some(true),
            ..base.clone()
        };
        assert_eq!(child.diagnose("EPERM", true), AccessDenial::Seccomp);
        let root = AccessFacts {
            tool_cap_sys_ptrace: Some(true),
            tool_uid: Some((0, 0)),
            target_dumpable: Some(false),
            yama_scope: Some(2),
            ..base.clone()
        };
        assert_eq!(root.diagnose("EPERM", true).code(), "unexplained");
        // Scope 3 refuses even root.
        let hard = AccessFacts {
            yama_scope: Some(3),
            ..root
        };
        assert_eq!(
            hard.diagnose("EPERM", true),
            AccessDenial::Yama { scope: 3 }
        );
        // A tracer does not refuse a memory read.
        let traced = AccessFacts {
            tracer: Some((99, "gdb".into())),
            ..base
        };
        assert_eq!(traced.diagnose("EPERM", false).code(), "unexplained");
    }

    #[test]
    fn every_reason_has_a_distinct_code_text_and_remedy() {
        let all = [
            AccessDenial::TracedBy {
                pid: 5,
                name: "gdb".into(),
            },
            AccessDenial::OtherUser {
                tool_uid: 1,
                target_uid: 2,
            },
            AccessDenial::NotDumpable,
            AccessDenial::Yama { scope: 1 },
            AccessDenial::Yama { scope: 2 },
            AccessDenial::Yama { scope: 3 },
            AccessDenial::Seccomp,
            AccessDenial::UserNamespace,
            AccessDenial::Exited,
            AccessDenial::Unexplained {
                errno: "EACCES".into(),
            },
        ];
        let texts: std::collections::HashSet<String> = all.iter().map(|d| d.to_string()).collect();
        assert_eq!(texts.len(), all.len());
        let remedies: std::collections::HashSet<String> = all.iter().map(|d| d.remedy()).collect();
        assert_eq!(remedies.len(), all.len());
        assert!(all[0].to_string().contains("pid 5 (gdb)"));
        assert!(all[0].is_transient() && !all[2].is_transient());
    }
}
