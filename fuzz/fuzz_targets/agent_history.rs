//! Histories a host hands the agent loop, valid or broken in the ways hosts break them, run
//! against a scripted model: refused with a reason before any request, or sent in a shape the
//! API takes, nothing lost (see `ferroloop_fuzz::check_agent_history`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    ferroloop_fuzz::check_agent_history(data);
});
