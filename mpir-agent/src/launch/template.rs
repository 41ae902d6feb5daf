//! A command per node from a template ([`super::Launch::Template`]): `ssh {host} {agent}`.

use std::ffi::OsString;

/// The template's words, `{agent}` replaced by the agent's command and `{host}` by the node.
pub(super) fn argv(template: &str, host: &str, agent: &[OsString]) -> Vec<OsString> {
    let mut argv: Vec<OsString> = Vec::new();
    for w in template.split_whitespace() {
        if w == "{agent}" {
            argv.extend(agent.iter().cloned());
        } else {
            argv.push(w.replace("{host}", host).into());
        }
    }
    argv
}
