//! Encoding for the tool daemon launch extension (MPIR 1.1 §7.1, §9.15–9.16): the daemon's
//! path into `MPIR_executable_path`, its arguments NUL-separated into `MPIR_server_arguments`,
//! each bounded by the real size of the starter's array.

use crate::error::AcquireError;

/// Size the spec gives `MPIR_executable_path`, used when the symbol has no size.
pub const SPEC_EXECUTABLE_PATH_SIZE: u64 = 256;
/// Size the spec gives `MPIR_server_arguments`, used when the symbol has no size.
pub const SPEC_SERVER_ARGUMENTS_SIZE: u64 = 1024;

fn fits(what: &str, bytes: Vec<u8>, capacity: u64) -> Result<Vec<u8>, AcquireError> {
    if bytes.len() as u64 > capacity {
        return Err(AcquireError::ToolDaemon(format!(
            "{what} needs {} bytes, the starter's array holds {capacity}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

/// The bytes to write into `MPIR_executable_path` (the path and its NUL).
pub fn executable_path(path: &str, capacity: u64) -> Result<Vec<u8>, AcquireError> {
    if path.is_empty() {
        return Err(AcquireError::ToolDaemon("empty daemon path".into()));
    }
    if path.contains('\0') {
        return Err(AcquireError::ToolDaemon(
            "the daemon path contains a NUL byte".into(),
        ));
    }
    let mut bytes = path.as_bytes().to_vec();
    bytes.push(0);
    fits("MPIR_executable_path", bytes, capacity)
}

/// The bytes to write into `MPIR_server_arguments`: each argument followed by a NUL, and a
/// final NUL ending the list. Empty arguments cannot be encoded (they would end the list).
pub fn server_arguments(args: &[String], capacity: u64) -> Result<Vec<u8>, AcquireError> {
    let mut bytes = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a.is_empty() {
            return Err(AcquireError::ToolDaemon(format!(
                "argument {i} is empty: NUL-separated arguments cannot carry it"
            )));
        }
        if a.contains('\0') {
            return Err(AcquireError::ToolDaemon(format!(
                "argument {i} contains a NUL byte"
            )));
        }
        bytes.extend_from_slice(a.as_bytes());
        bytes.push(0);
    }
    bytes.push(0);
    fits("MPIR_server_arguments", bytes, capacity)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_nul_separated_and_bounded() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            server_arguments(&a(&["-v", "x y"]), 64).unwrap(),
            b"-v\0x y\0\0"
        );
        assert_eq!(server_arguments(&[], 1).unwrap(), b"\0");
        assert!(server_arguments(&a(&["abc"]), 4).is_err(), "needs 5 bytes");
        assert!(server_arguments(&a(&["abc"]), 5).is_ok());
        assert!(server_arguments(&a(&["", "x"]), 64).is_err());
        assert!(server_arguments(&a(&["a\0b"]), 64).is_err());
        assert_eq!(executable_path("/bin/d", 7).unwrap(), b"/bin/d\0");
        assert!(executable_path("/bin/d", 6).is_err());
        assert!(executable_path("", 6).is_err());
        let e = executable_path(&"x".repeat(600), 512)
            .unwrap_err()
            .to_string();
        assert!(e.contains("601") && e.contains("512"), "{e}");
    }
}
