//! `mpir`: see the library part of this package (`mpir_cli`) for what it does.

fn main() -> std::process::ExitCode {
    mpir_cli::main()
}
