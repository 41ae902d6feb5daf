//! `mpir-mqd-host`: the helper process of out-of-process MQD DLL hosting. It loads one DLL
//! and serves an `mpir_mqd::OutOfProcessHost` over its stdin and stdout; it is not meant to be
//! run by hand. Install it next to the tool that uses `mpir-mqd`, or name it with
//! `$MPIR_MQD_HOST`.

fn main() -> std::process::ExitCode {
    mpir_mqd::helper_main()
}
