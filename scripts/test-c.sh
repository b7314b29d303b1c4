#!/usr/bin/env bash
# The C suite of ferroloop: builds libferroloop (bindings/c) and installs it with its header and a
# pkg-config file under target/capi/ (scripts/install-c.sh), checks the pkg-config file (also
# after the install is moved), the shared library's SONAME and links and what a linked program
# records as NEEDED, compiles every C program in bindings/c/tests/ with `cc -Wall -Wextra -Werror`
# against the header and the library, runs each one, then runs each one again under valgrind
# (zero errors and zero leaks required), and builds the C benchmark driver (benches/c/sse_feed.c),
# checking its two ways of feeding agree. One program is also linked statically through
# pkg-config. Prints "N passed, N failed" and fails if anything failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"

need() { command -v "$1" >/dev/null 2>&1; }
missing=()
need cc || missing+=(gcc libc6-dev)
need valgrind || missing+=(valgrind)
need pkg-config || missing+=(pkgconf)
need readelf || missing+=(binutils)
if ((${#missing[@]})); then
    echo "installing: ${missing[*]}"
    sudo_cmd=()
    [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"

# Stage the library like an install: lib/, include/, lib/pkgconfig/, with the installer users run
# (scripts/install-c.sh; a debug build here, to keep CI fast), so the suite checks what it installs.
stage="$target_dir/capi"
rm -rf "$stage"
FERROLOOP_PROFILE=dev bash scripts/install-c.sh "$stage" >/dev/null
mkdir -p "$stage/bin"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"
export PKG_CONFIG_PATH="$stage/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

# The complete C program under a README heading ("## Example: ...", the first ```c block after it).
readme_example() {
    awk -v heading="## $1" 'index($0, heading) == 1 { section = 1 }
        section && /^```$/ && inside { exit }
        inside { print }
        section && /^```c$/ { inside = 1 }' bindings/c/README.md
}
# One dynamic-section entry of an ELF file (SONAME, NEEDED...), one value a line.
elf_entry() { # tag, file
    LC_ALL=C readelf -d "$2" | sed -n "s/.*($1).*\[\(.*\)\]\$/\1/p"
}

cflags=(-std=c11 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -g)
passed=0
failed=0
record() { # name, status
    if [[ $2 -eq 0 ]]; then
        passed=$((passed + 1))
        echo "PASS $1"
    else
        failed=$((failed + 1))
        echo "FAIL $1"
    fi
}

# The installed pkg-config file: the workspace's version, the prefix's directories, named relative
# to the file's own directory (${pcfiledir}) and not by the absolute path it was installed at.
status=0
[[ "$(pkg-config --modversion ferroloop)" == "$version" &&
    "$(realpath "$(pkg-config --variable=libdir ferroloop)")" == "$(realpath "$stage/lib")" &&
    "$(realpath "$(pkg-config --variable=includedir ferroloop)")" == "$(realpath "$stage/include")" &&
    "$(pkg-config --cflags ferroloop)" == -I*/include* ]] || status=1
grep -qF "$stage" "$stage/lib/pkgconfig/ferroloop.pc" && { status=1; echo "ferroloop.pc names $stage"; }
record "pkg-config file of the install" "$status"

# A moved install: installed in one directory, moved to another, the README's SSE example builds
# with nothing but `pkg-config --cflags --libs` of the moved .pc file and runs.
status=0
first="$target_dir/capi-installed-here"
moved="$target_dir/capi-moved-there"
rm -rf "$first" "$moved"
FERROLOOP_PROFILE=dev bash scripts/install-c.sh "$first" >/dev/null
mv "$first" "$moved"
readme_example "Example: the SSE parser" >"$moved/sse_example.c"
moved_flags="$(PKG_CONFIG_PATH="$moved/lib/pkgconfig" pkg-config --cflags --libs ferroloop)"
moved_libdir="$(PKG_CONFIG_PATH="$moved/lib/pkgconfig" pkg-config --variable=libdir ferroloop)"
# shellcheck disable=SC2086 # pkg-config prints several words on purpose.
if [[ $moved_flags != *"$first"* ]] &&
    cc "${cflags[@]}" "$moved/sse_example.c" -o "$moved/sse_example" $moved_flags; then
    [[ "$(LD_LIBRARY_PATH="$moved_libdir" "$moved/sse_example")" == 'ping: {"a":1}' ]] || status=1
else
    status=1
    echo "moved install: pkg-config --cflags --libs ferroloop: $moved_flags"
fi
rm -rf "$moved"
record "moved install builds the README example via pkg-config" "$status"

# The header alone, as strict C99 and (when a C++ compiler exists) as C++.
probe="$stage/bin/header_probe"
printf '#include "ferroloop.h"\nint main(void) { return fl_version() == 0; }\n' >"$probe.c"
status=0
cc -std=c99 -pedantic -Wall -Wextra -Werror -I"$stage/include" -c "$probe.c" -o "$probe.o" || status=$?
record "header as C99" "$status"
if command -v c++ >/dev/null 2>&1; then
    cp "$probe.c" "$probe.cpp"
    status=0
    c++ -std=c++11 -Wall -Wextra -Werror -I"$stage/include" -c "$probe.cpp" -o "$probe.o" || status=$?
    record "header as C++11" "$status"
fi

# The shared library is installed under its full version, with its SONAME (bindings/c/build.rs:
# libferroloop.so.0.MINOR while the version is 0.x, else libferroloop.so.MAJOR) and the
# link-time name libferroloop.so as symlinks to it; a program linked through pkg-config records
# the SONAME (not the bare libferroloop.so) as NEEDED, and the loader finds it by that name.
abi="$(awk -F. '{ print ($1 == 0) ? "0." $2 : $1 }' <<<"$version")"
soname="libferroloop.so.$abi"
real="libferroloop.so.$version"
status=0
[[ -f "$stage/lib/$real" && ! -L "$stage/lib/$real" &&
    "$(readlink "$stage/lib/$soname")" == "$real" &&
    "$(readlink "$stage/lib/libferroloop.so")" == "$real" &&
    "$(elf_entry SONAME "$stage/lib/$real")" == "$soname" ]] ||
    { status=1; ls -l "$stage/lib"; elf_entry SONAME "$stage/lib/libferroloop.so"; }
record "SONAME $soname and the installed names" "$status"
status=0
# shellcheck disable=SC2046 # pkg-config prints several words on purpose.
if cc -Wall -Werror "$probe.c" -o "$probe" $(pkg-config --cflags --libs ferroloop); then
    needed="$(elf_entry NEEDED "$probe")"
    grep -qxF "$soname" <<<"$needed" || { status=1; printf 'NEEDED:\n%s\n' "$needed"; }
    LD_LIBRARY_PATH="$stage/lib" "$probe" || status=1
else
    status=1
fi
record "a program linked via pkg-config needs $soname and runs" "$status"

programs=()
for source in bindings/c/tests/*.c; do
    name="$(basename "$source" .c)"
    # shellcheck disable=SC2046 # pkg-config prints several words on purpose.
    if cc "${cflags[@]}" "$source" -o "$stage/bin/$name" $(pkg-config --cflags --libs ferroloop) -lpthread; then
        programs+=("$name")
    else
        record "compile $name" 1
    fi
done

# Panics are expected in the boundary tests (the static test_errors run below included): no
# backtraces in the log. Each panic's one-line message still goes to stderr, and a failing
# program still fails its check.
unset RUST_BACKTRACE RUST_LIB_BACKTRACE

# A static link (libferroloop.a) of one program, to prove the static library and its
# Libs.private are complete.
# shellcheck disable=SC2046
if cc "${cflags[@]}" bindings/c/tests/test_errors.c -o "$stage/bin/test_errors_static" \
    $(pkg-config --cflags ferroloop) "$stage/lib/libferroloop.a" $(pkg-config --static --libs-only-l ferroloop | sed 's/-lferroloop//'); then
    set +e
    "$stage/bin/test_errors_static" >/dev/null
    record "static test_errors" $?
    set -e
else
    record "compile static test_errors" 1
fi

export LD_LIBRARY_PATH="$stage/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for name in "${programs[@]}"; do
    set +e
    "$stage/bin/$name" "$root"
    record "$name" $?
    valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,possible \
        --suppressions=bindings/c/tests/valgrind.supp \
        "$stage/bin/$name" "$root" >/dev/null
    record "valgrind $name" $?
    set -e
done

# The benchmark driver (benches/c/sse_feed.c) compiles, and its two ways of feeding agree on a
# fixture (event count, data bytes, checksum) at a small and a large chunk size.
# shellcheck disable=SC2046
if cc "${cflags[@]}" benches/c/sse_feed.c -o "$stage/bin/sse_feed" $(pkg-config --cflags --libs ferroloop) -lpthread; then
    fixture=tests/fixtures/anthropic/tool_use_response.sse
    status=0
    for chunk in 7 4096; do
        next="$("$stage/bin/sse_feed" feed-next "$chunk" "$fixture" | sed 's/^[a-z-]* //')" || status=1
        each="$("$stage/bin/sse_feed" feed-each "$chunk" "$fixture" | sed 's/^[a-z-]* //')" || status=1
        [[ -n "$next" && "$next" == "$each" && "$next" != *" 0 events"* ]] || status=1
    done
    record "bench driver sse_feed" "$status"
else
    record "compile bench driver sse_feed" 1
fi

# The README's complete C program ("Example: the SSE parser") compiles as written, runs clean
# under valgrind and prints the event it parses.
example="$stage/bin/readme_sse_example"
readme_example "Example: the SSE parser" >"$example.c"
status=0
# shellcheck disable=SC2046
if [[ -s "$example.c" ]] && cc "${cflags[@]}" "$example.c" -o "$example" $(pkg-config --cflags --libs ferroloop); then
    set +e
    printed="$("$example")" && [[ "$printed" == 'ping: {"a":1}' ]] || status=1
    valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,possible \
        --suppressions=bindings/c/tests/valgrind.supp "$example" >/dev/null || status=1
    set -e
else
    status=1
fi
record "README SSE example" "$status"

# The README's streaming turn example compiles as written, runs clean under valgrind and prints
# both results in request order, then the results array.
example="$stage/bin/readme_turn_example"
readme_example "Example: a streaming turn" >"$example.c"
status=0
# shellcheck disable=SC2046
if [[ -s "$example.c" ]] && cc "${cflags[@]}" "$example.c" -o "$example" $(pkg-config --cflags --libs ferroloop); then
    set +e
    printed="$("$example")"
    expected='0 {"type":"tool_result","tool_use_id":"toolu_1","content":"{\"n\":1}","is_error":false}
1 {"type":"tool_result","tool_use_id":"toolu_2","content":"{\"n\":2}","is_error":false}
[{"type":"tool_result","tool_use_id":"toolu_1","content":"{\"n\":1}","is_error":false},{"type":"tool_result","tool_use_id":"toolu_2","content":"{\"n\":2}","is_error":false}]'
    [[ "$printed" == "$expected" ]] || { status=1; printf 'printed:\n%s\n' "$printed"; }
    valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,possible \
        --suppressions=bindings/c/tests/valgrind.supp "$example" >/dev/null || status=1
    set -e
else
    status=1
fi
record "README turn example" "$status"

# The README's agent example compiles as written and runs clean under valgrind against a closed
# loopback port (no network; no proxy from the environment): its run ends with a `stop` event
# whose error_code is `connection`, the client's retries spent.
example="$stage/bin/readme_agent_example"
readme_example "Example: the agent loop" >"$example.c"
status=0
# shellcheck disable=SC2046
if [[ -s "$example.c" ]] && cc "${cflags[@]}" "$example.c" -o "$example" $(pkg-config --cflags --libs ferroloop); then
    set +e
    offline=(env -u HTTPS_PROXY -u https_proxy -u HTTP_PROXY -u http_proxy
        ANTHROPIC_API_KEY=test-key ANTHROPIC_BASE_URL=http://127.0.0.1:9)
    printed="$("${offline[@]}" "$example" | tail -n1)"
    [[ "$printed" == '{"type":"stop","reason":"error",'*'"error_code":"connection"'* ]] ||
        { status=1; printf 'printed:\n%s\n' "$printed"; }
    "${offline[@]}" valgrind -q --error-exitcode=1 --leak-check=full \
        --errors-for-leak-kinds=definite,possible \
        --suppressions=bindings/c/tests/valgrind.supp "$example" >/dev/null || status=1
    set -e
else
    status=1
fi
record "README agent example" "$status"

# The README's streaming client example compiles as written and runs clean under valgrind
# against a closed loopback port (no network; no proxy from the environment): two `retry` events,
# then the connection failure as JSON, then typed.
example="$stage/bin/readme_client_example"
readme_example "Example: the streaming client alone" >"$example.c"
status=0
# shellcheck disable=SC2046
if [[ -s "$example.c" ]] && cc "${cflags[@]}" "$example.c" -o "$example" $(pkg-config --cflags --libs ferroloop); then
    set +e
    offline=(env -u HTTPS_PROXY -u https_proxy -u HTTP_PROXY -u http_proxy
        ANTHROPIC_API_KEY=test-key ANTHROPIC_BASE_URL=http://127.0.0.1:9)
    printed="$("${offline[@]}" "$example")"
    [[ "$(grep -c '^{"type":"retry",' <<<"$printed")" == 2 &&
        "$(tail -n2 <<<"$printed" | head -n1)" == '{"code":"connection","message":"connection error: '*'"status":null,"request_id":null}' &&
        "$(tail -n1 <<<"$printed")" == 'failed: connection (HTTP 0): connection error: '* ]] ||
        { status=1; printf 'printed:\n%s\n' "$printed"; }
    "${offline[@]}" valgrind -q --error-exitcode=1 --leak-check=full \
        --errors-for-leak-kinds=definite,possible \
        --suppressions=bindings/c/tests/valgrind.supp "$example" >/dev/null || status=1
    set -e
else
    status=1
fi
record "README client example" "$status"

# The README's fragments (the ```c blocks without a main: feed_each, decoding, tools, JSON options,
# the safety predicate, when to compact, budget options) compile against the header as written,
# given declarations of what they leave to the reader (a parser, a buffer, a worker thread...):
# each fragment's leading `static` functions stay at file scope, its statements go in a function.
fragments="$stage/readme-fragments"
rm -rf "$fragments" && mkdir -p "$fragments"
awk -v dir="$fragments" '
    /^```c$/ { inside = 1; count++; file = sprintf("%s/block%02d.c", dir, count); next }
    inside && /^```$/ { inside = 0; close(file); next }
    inside { print > file }' bindings/c/README.md
status=0
checked=0
for block in "$fragments"/block*.c; do
    grep -q 'int main(' "$block" && continue # a whole program: run above
    checked=$((checked + 1))
    wrapped="${block%.c}.wrapped.c"
    {
        cat <<'PRELUDE'
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "ferroloop.h"
/* What the fragments leave to the reader. */
extern fl_sse_parser *parser;
extern const uint8_t *buf, *chunk, *block;
extern size_t n, chunk_len, block_len, tool_uses_len, system_len, message_len, usage_len;
extern const char *tool_uses_json, *system_json, *message_json, *usage_json;
extern void *my_state;
extern fl_executor *executor;
extern fl_context_budget *budget;
void handle_event(const char *json, size_t len);
void *copy_of(const fl_tool_invocation *call_info);
void start_worker_thread(void *input, fl_tool_call *call);
void shell_tool(void *userdata, const fl_tool_invocation *call_info, fl_tool_call *call);
PRELUDE
        grep -q '^static void read_file_tool(' "$block" ||
            echo 'void read_file_tool(void *userdata, const fl_tool_invocation *call_info, fl_tool_call *call);'
        awk '
            !body && /^static / { top = 1 }
            top { print; if ($0 == "}") top = 0; next }
            !body && /^[[:space:]]*$/ { print; next }
            !body { body = 1; print "void readme_fragment(void) {" }
            { print }
            END { if (body) print "}" }' "$block"
    } >"$wrapped"
    # shellcheck disable=SC2046
    cc "${cflags[@]}" -Wno-unused-variable -Wno-unused-but-set-variable -Wno-unused-parameter \
        -fsyntax-only "$wrapped" $(pkg-config --cflags ferroloop) || { status=1; echo "README fragment: $wrapped"; }
done
[[ $checked -eq 7 ]] || { status=1; echo "README fragments: $checked, expected 7 (one added or removed?)"; }
record "README C fragments compile" "$status"

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
