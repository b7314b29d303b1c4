#!/usr/bin/env bash
# Installs the C library of ferroloop under a prefix: PREFIX/lib/libferroloop.so.VERSION (the
# shared library) with its SONAME (libferroloop.so.0.MINOR while the version is 0.x: see
# bindings/c/build.rs) and libferroloop.so as symlinks to it, PREFIX/lib/libferroloop.a,
# PREFIX/include/ferroloop.h and PREFIX/lib/pkgconfig/ferroloop.pc (generated from
# bindings/c/ferroloop.pc.in with paths relative to the .pc file's own directory, so the prefix
# may be moved or copied elsewhere, and the workspace's version). Builds the library first,
# optimised unless FERROLOOP_PROFILE names another cargo profile. Linux (ELF) only.
#
#   bash scripts/install-c.sh /usr/local                        # a release build, installed
#   PKG_CONFIG_PATH=/usr/local/lib/pkgconfig pkg-config --cflags --libs ferroloop
#   FERROLOOP_PROFILE=dev bash scripts/install-c.sh target/capi  # what scripts/test-c.sh stages
set -euo pipefail
prefix="${1:?usage: bash scripts/install-c.sh PREFIX}"
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
prefix="$(cd "$prefix" && pwd)"
cd "$(dirname "$0")/.."

profile="${FERROLOOP_PROFILE:-release}"
cargo build -p ferroloop-capi --locked --quiet --profile "$profile"
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
# Cargo's `dev` profile builds into target/debug; every other profile into a directory of its name.
build="$target_dir/$([[ $profile == dev ]] && echo debug || echo "$profile")"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"

# The SONAME is the one the linker wrote (bindings/c/build.rs decides it); the loader looks for a
# file of that name, so it must exist in lib/. Cargo builds the file as plain libferroloop.so.
soname="$(LC_ALL=C readelf -d "$build/libferroloop.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')"
if [[ $soname != libferroloop.so.* ]]; then
    echo "install-c.sh: $build/libferroloop.so has no SONAME libferroloop.so.*: '$soname'" >&2
    exit 1
fi
real="libferroloop.so.$version"
install -m 0755 "$build/libferroloop.so" "$prefix/lib/$real"
ln -sfn "$real" "$prefix/lib/$soname" # what programs load
ln -sfn "$real" "$prefix/lib/libferroloop.so" # what `-lferroloop` finds when linking
install -m 0644 "$build/libferroloop.a" "$prefix/lib/"
install -m 0644 bindings/c/include/ferroloop.h "$prefix/include/"
# The system libraries a static libferroloop needs (as reported by rustc for this target).
private_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
# Relocatable: pkg-config and pkgconf set ${pcfiledir} to the directory the .pc file was found in
# (PREFIX/lib/pkgconfig). The single quotes keep the ${...} for pkg-config to expand.
# shellcheck disable=SC2016
sed -e 's|@PREFIX@|${pcfiledir}/../..|' -e 's|@LIBDIR@|${prefix}/lib|' \
    -e 's|@INCLUDEDIR@|${prefix}/include|' \
    -e "s|@VERSION@|$version|" -e "s|@PRIVATE_LIBS@|$private_libs|" \
    bindings/c/ferroloop.pc.in >"$prefix/lib/pkgconfig/ferroloop.pc"
echo "installed libferroloop $version ($profile, SONAME $soname) under $prefix"
