//! # ferroloop
//!
//! The hot path of an LLM agent loop, written once in Rust: a zero-copy Server-Sent-Events
//! parser ([`sse`]), provider stream decoding, token estimation and a concurrent tool executor.
//!
//! The crate is binding-agnostic: the Python, Node and C bindings are thin translation layers
//! over the types defined here.

pub mod agent;
#[cfg(feature = "client")]
pub mod client;
pub mod decode;
pub mod exec;
mod inflate;
mod json_number;
pub mod json_text;
pub mod message;
pub mod sse;
pub mod text;
pub mod tokens;
#[cfg(feature = "tools")]
pub mod tools;

pub use text::Utf8Bytes;
