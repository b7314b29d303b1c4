//! The workloads of `ferroloop bench`, generated deterministically (seeded).

use bytes::Bytes;

use crate::runner::{Case, Unit, Workload};
use crate::sse_peers::SseImpl;
use crate::workloads::{anthropic_stream, chunked, openai_chat_stream, single_large_event};

/// Sizes of the generated inputs.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// The Anthropic-shaped stream (6 MB by default).
    pub anthropic: usize,
    /// The single large event (16 MiB by default).
    pub large_event: usize,
    /// The prefix fed one byte at a time.
    pub byte_at_a_time: usize,
}

impl Sizes {
    /// Full sizes, or a fraction of them for `--quick`.
    pub fn new(quick: bool) -> Self {
        if quick {
            Self {
                anthropic: 1_000_000,
                large_event: 2 << 20,
                byte_at_a_time: 32 * 1024,
            }
        } else {
            Self {
                anthropic: 6_000_000,
                large_event: 16 << 20,
                byte_at_a_time: 256 * 1024,
            }
        }
    }
}

fn label(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{}MiB", bytes >> 20)
    } else if bytes >= 1_000_000 {
        format!("{}MB", bytes / 1_000_000)
    } else {
        format!("{}KiB", bytes / 1024)
    }
}

fn sse_workload(name: String, input: &Bytes, chunk: usize, peers: &[SseImpl]) -> Workload {
    let chunks = std::rc::Rc::new(chunked(input, chunk));
    let events = SseImpl::Ferroloop.parse(&chunks).events;
    let cases = peers
        .iter()
        .map(|imp| {
            let chunks = chunks.clone();
            let imp = *imp;
            Case::new(imp.name(), move || imp.parse(&chunks).events)
        })
        .collect();
    Workload {
        name,
        unit: Unit::Bytes(input.len() as u64),
        events,
        cases,
        same_checksum: true,
    }
}

/// SSE framing workloads: the Anthropic-shaped stream at several chunk sizes, a single large
/// event beside a plain copy (the floor), and an OpenAI-chat-shaped stream.
pub fn sse_workloads(sizes: Sizes) -> Vec<Workload> {
    let mut out = Vec::new();
    let anthropic = anthropic_stream(42, sizes.anthropic);
    let all = SseImpl::ALL;
    for (chunk, chunk_label) in [(16 * 1024, "16KiB"), (1460, "1460B"), (64, "64B")] {
        let name = format!("sse/anthropic-{}/{chunk_label}", label(sizes.anthropic));
        out.push(sse_workload(name, &anthropic, chunk, &all));
    }
    let prefix = anthropic.slice(..sizes.byte_at_a_time.min(anthropic.len()));
    out.push(sse_workload(
        format!("sse/anthropic-{}/1B", label(prefix.len())),
        &prefix,
        1,
        &all,
    ));

    let large = single_large_event(sizes.large_event);
    let mut workload = sse_workload(
        format!("sse/single-{}/1460B", label(large.len())),
        &large,
        1460,
        &all,
    );
    let chunks = chunked(&large, 1460);
    let mut copy = Vec::with_capacity(large.len());
    workload.cases.push(Case::new("memcpy (floor)", move || {
        copy.clear();
        for chunk in &chunks {
            copy.extend_from_slice(chunk);
        }
        std::hint::black_box(copy.len());
        1
    }));
    workload.same_checksum = false;
    out.push(workload);

    let openai = openai_chat_stream(7, sizes.anthropic);
    out.push(sse_workload(
        format!("sse/openai-chat-{}/1460B", label(sizes.anthropic)),
        &openai,
        1460,
        &all,
    ));
    out
}

/// Every workload, filtered by a substring of its name.
pub fn suite(quick: bool, filter: Option<&str>) -> Vec<Workload> {
    let sizes = Sizes::new(quick);
    let mut all = sse_workloads(sizes);
    if let Some(filter) = filter {
        all.retain(|w| w.name.contains(filter));
    }
    all
}
