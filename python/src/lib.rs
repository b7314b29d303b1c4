//! Python bindings of ferroloop: the extension module `ferroloop._native`.
//!
//! A thin translation layer (DESIGN.md, "Binding conventions"): Python objects in, a core call,
//! Python objects out, errors mapped to the exceptions of `ferroloop/_errors.py`. Every entry
//! point runs inside `errors::shield`, so a Rust panic surfaces as `ferroloop.InternalError`.
//! Logic that is not translation belongs in the core crate.

mod agent;
mod args;
mod bridge;
mod client;
mod debug;
mod decode;
mod errors;
mod events;
mod exec;
mod runtime;
mod sse;
mod tokens;
mod value;

use pyo3::prelude::*;

// The executor allocates and frees a dozen small Rust objects per tool call (the call's future,
// its reply channel, the input and result values); with glibc's allocator that was ~15 % of a
// batch of no-op tools (free-list consolidation included). mimalloc serves the extension's own
// allocations only; Python objects still come from the interpreter's allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The extension module. `gil_used = true`: the module has not been audited and tested on a
/// free-threaded interpreter, so it asks such an interpreter to keep the GIL enabled (and the
/// abi3 wheel cannot load on a free-threaded build anyway).
#[pymodule(name = "_native", gil_used = true)]
fn native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    debug::register(module)?;
    sse::register(module)?;
    decode::register(module)?;
    exec::register(module)?;
    client::register(module)?;
    agent::register(module)?;
    tokens::register(module)?;
    // Before the interpreter finalizes, ferroloop's threads leave Python (see `runtime`).
    let at_exit = wrap_pyfunction!(runtime::_at_exit, module)?;
    module.add_function(at_exit.clone())?;
    module
        .py()
        .import("atexit")?
        .call_method1("register", (at_exit,))?;
    // A forked child gets its own runtime (see `runtime::_after_fork_in_child`).
    let after_fork = wrap_pyfunction!(runtime::_after_fork_in_child, module)?;
    module.add_function(after_fork.clone())?;
    let os = module.py().import("os")?;
    if os.hasattr("register_at_fork")? {
        let kwargs = pyo3::types::PyDict::new(module.py());
        kwargs.set_item("after_in_child", after_fork)?;
        os.call_method("register_at_fork", (), Some(&kwargs))?;
    }
    Ok(())
}
