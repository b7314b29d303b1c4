//! The SONAME of the shared library (ELF targets): `libferroloop.so.0.<minor>` while the version
//! is 0.x, `libferroloop.so.<major>` from 1.0 on.
//!
//! The SONAME is the name a program linked against the library records (its `NEEDED` entry) and
//! the dynamic loader looks for, so it must change exactly when the ABI may break. Cargo's rules
//! for a 0.x version make its minor the breaking part (0.1.0 → 0.1.1 is compatible, 0.1 → 0.2 is
//! not), so a plain `libferroloop.so.0` would let a program built against 0.1 load 0.2; cargo-c
//! names a 0.x library the same way. The header has no version macros; `fl_version()` returns the
//! full version at run time. `scripts/install-c.sh` installs the library as
//! `libferroloop.so.<full version>` with the SONAME and `libferroloop.so` as symlinks to it, and
//! `scripts/test-c.sh` checks the SONAME, the links and a program's `NEEDED` entry.
//!
//! `rustc-cdylib-link-arg` reaches only this package's cdylib: not its static library, its tests,
//! nor the Python and Node extensions (other packages).

#![allow(
    clippy::print_stdout,
    reason = "a build script speaks to cargo through its standard output"
)]

use std::env;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    // The targets whose linker takes `-soname` (ELF); macOS names a dylib by `-install_name`
    // and Windows has no equivalent.
    let elf = matches!(
        os.as_str(),
        "linux" | "android" | "freebsd" | "netbsd" | "openbsd" | "dragonfly" | "illumos"
    );
    if !elf {
        return;
    }
    let major = env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_default();
    let minor = env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_default();
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major
    };
    println!("cargo::rustc-cdylib-link-arg=-Wl,-soname,libferroloop.so.{abi}");
}
