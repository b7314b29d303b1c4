//! Link settings napi-rs needs for a Node addon (undefined N-API symbols resolved at load time).

fn main() {
    napi_build::setup();
}
