//! libmpir.so: the symbol versions of `mpir.map`, and the soname `libmpir.so.0` (cargo-c sets
//! the same when it builds the library).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=mpir.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/mpir.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpir.so.0");
}
