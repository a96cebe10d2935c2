//! Gives the shared library the SONAME of MPICH's ABI, so that a program linked against
//! MPICH's `libmpich.so.12` loads this library when it comes first in the library path.

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpich.so.12");
    println!("cargo:rerun-if-changed=build.rs");
}
