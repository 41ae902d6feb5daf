//! `layouts`: the Open MPI struct layouts shipped in this binary (`mpir_mqd::layouts`): list
//! them, or generate one from a types object (what `scripts/openmpi-layouts.sh` calls).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use mpir_mqd::layouts::{self, Release};

#[derive(clap::Args)]
pub(crate) struct LayoutsArgs {
    #[command(subcommand)]
    cmd: Option<LayoutsCmd>,
}

#[derive(clap::Subcommand)]
enum LayoutsCmd {
    /// List the shipped sets (the default).
    List,
    /// Print the layouts file of one release and configuration, from a types object: a
    /// DWARF-only object compiled with `gcc -g` from a C file including that build's configured
    /// headers and declaring `T mpir_sidecar_T;` for each type T to describe.
    Generate {
        /// The types object.
        #[arg(long, value_name = "FILE")]
        object: PathBuf,
        /// The Open MPI release, e.g. 4.1.4.
        #[arg(long, value_parser = parse_release)]
        release: Release,
        /// The configuration's name (one word), e.g. debian, debug, wheel.
        #[arg(long)]
        config: String,
        /// The configuration is a debug build (--enable-debug).
        #[arg(long)]
        debug: bool,
        /// Where the headers came from (archive and checksum), recorded in the file.
        #[arg(long)]
        source: String,
    },
}

fn parse_release(text: &str) -> Result<Release, String> {
    Release::parse(text).ok_or_else(|| format!("{text:?} is not a release like 4.1.4"))
}

pub(crate) fn run(args: &LayoutsArgs) -> anyhow::Result<ExitCode> {
    match &args.cmd {
        None | Some(LayoutsCmd::List) => {
            for (file, set) in layouts::shipped_files() {
                match set {
                    Ok(s) => outln!(
                        "{:<32} {} types, debug {}; from {}",
                        s.id(),
                        s.type_names().count(),
                        if s.debug { "yes" } else { "no" },
                        s.source
                    ),
                    Err(e) => outln!("{file}: {e}"),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Some(LayoutsCmd::Generate {
            object,
            release,
            config,
            debug,
            source,
        }) => {
            anyhow::ensure!(
                !config.is_empty() && !config.contains(char::is_whitespace),
                "--config is one word"
            );
            let set = layouts::generate(object, *release, config, *debug, source)
                .with_context(|| format!("generating layouts from {}", object.display()))?;
            outln!("{}", set.render().trim_end_matches('\n'));
            Ok(ExitCode::SUCCESS)
        }
    }
}
