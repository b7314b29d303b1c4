//! Workloads and peer adapters for comparing ferroloop with the libraries people would otherwise
//! use. The criterion benches (`benches/`) and `ferroloop bench` both build on this crate; the
//! peers live only here, never in the core.

pub mod alloc;
pub mod batch_tool;
pub mod decode_peers;
pub mod memory;
pub mod runner;
pub mod sse_peers;
pub mod suite;
pub mod token_corpus;
pub mod tool_input;
pub mod workloads;
