#!/usr/bin/env bash
# Installs the C library of ferroloop under a prefix: PREFIX/lib/libferroloop.so and
# libferroloop.a, PREFIX/include/ferroloop.h and PREFIX/lib/pkgconfig/ferroloop.pc (generated from
# bindings/c/ferroloop.pc.in with the prefix's paths and the workspace's version). Builds the
# library first, optimised unless FERROLOOP_PROFILE names another cargo profile.
#
#   bash scripts/install-c.sh /usr/local                        # a release build, installed
#   PKG_CONFIG_PATH=/usr/local/lib/pkgconfig pkg-config --cflags --libs ferroloop
#   FERROLOOP_PROFILE=dev bash scripts/install-c.sh target/capi  # what scripts/test-c.sh stages
set -euo pipefail
prefix="${1:?usage: bash scripts/install-c.sh PREFIX}"
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
# The .pc file's paths must be absolute: pkg-config hands them to the compiler as they are.
prefix="$(cd "$prefix" && pwd)"
cd "$(dirname "$0")/.."

profile="${FERROLOOP_PROFILE:-release}"
cargo build -p ferroloop-capi --locked --quiet --profile "$profile"
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
# Cargo's `dev` profile builds into target/debug; every other profile into a directory of its name.
build="$target_dir/$([[ $profile == dev ]] && echo debug || echo "$profile")"

install -m 0755 "$build/libferroloop.so" "$prefix/lib/"
install -m 0644 "$build/libferroloop.a" "$prefix/lib/"
install -m 0644 bindings/c/include/ferroloop.h "$prefix/include/"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"
# The system libraries a static libferroloop needs (as reported by rustc for this target).
private_libs="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"
sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$prefix/lib|" -e "s|@INCLUDEDIR@|$prefix/include|" \
    -e "s|@VERSION@|$version|" -e "s|@PRIVATE_LIBS@|$private_libs|" \
    bindings/c/ferroloop.pc.in >"$prefix/lib/pkgconfig/ferroloop.pc"
echo "installed libferroloop $version ($profile) under $prefix"
