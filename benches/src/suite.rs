//! The workloads of `ferroloop bench`, generated deterministically (seeded).

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use ferroloop::exec::{
    BudgetConfig, CancellationToken, ExecutorConfig, FnTool, Tool, ToolContext, ToolExecutor,
    ToolOutput, ToolRegistry, ToolResult, ToolUse,
};
use ferroloop::tokens::{Family, estimate_text};

use crate::decode_peers::{
    DecodeImpl, DecodeSummary, ferroloop_openai_chat, ferroloop_openai_chat_serde,
    naive_openai_chat,
};
use crate::runner::{Case, Unit, Workload};
use crate::sse_peers::SseImpl;
use crate::token_corpus::mixed_corpus;
use crate::tool_input::{self, tool_input_stream};
use crate::workloads::{
    anthropic_stream, chunked, openai_chat_stream, openai_chat_stream_obfuscated,
    single_large_event,
};

/// Sizes of the generated inputs.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// The Anthropic-shaped and OpenAI-chat-shaped streams (6 MB by default).
    pub anthropic: usize,
    /// The single large event (16 MiB by default).
    pub large_event: usize,
    /// The prefix fed one byte at a time.
    pub byte_at_a_time: usize,
    /// The single event again, small enough for `eventsource-stream`, which is quadratic in an
    /// event's size (512 KiB by default).
    pub small_event: usize,
    /// The tool input streamed in 1-character deltas (1 MiB by default).
    pub tool_input: usize,
    /// The tool input viewed after every delta, where the naive peer is quadratic (16 KiB).
    pub tool_view: usize,
    /// The mixed token corpus (4 MiB by default).
    pub token_corpus: usize,
    /// No-op tool calls per turn (10,000).
    pub noop_calls: usize,
    /// Safe sleeping tools per turn (10).
    pub sleep_tools: usize,
    /// How long each sleeps (100 ms).
    pub sleep: Duration,
}

impl Sizes {
    /// Full sizes, or a fraction of them for `--quick`.
    pub fn new(quick: bool) -> Self {
        if quick {
            Self {
                anthropic: 1_000_000,
                large_event: 2 << 20,
                byte_at_a_time: 32 * 1024,
                small_event: 256 * 1024,
                tool_input: 256 * 1024,
                tool_view: 8 * 1024,
                token_corpus: 1 << 20,
                noop_calls: 10_000,
                sleep_tools: 10,
                sleep: Duration::from_millis(100),
            }
        } else {
            Self {
                anthropic: 6_000_000,
                large_event: 16 << 20,
                byte_at_a_time: 256 * 1024,
                small_event: 512 * 1024,
                tool_input: 1 << 20,
                tool_view: 16 * 1024,
                token_corpus: 4 << 20,
                noop_calls: 10_000,
                sleep_tools: 10,
                sleep: Duration::from_millis(100),
            }
        }
    }

    /// Tiny inputs, for testing the suite itself quickly (figures meaningless).
    pub fn tiny() -> Self {
        Self {
            anthropic: 20_000,
            large_event: 64 * 1024,
            byte_at_a_time: 2 * 1024,
            small_event: 16 * 1024,
            tool_input: 2 * 1024,
            tool_view: 1024,
            token_corpus: 8 * 1024,
            noop_calls: 100,
            sleep_tools: 3,
            sleep: Duration::from_millis(2),
        }
    }
}

fn label(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{}MiB", bytes >> 20)
    } else if bytes >= 1_000_000 {
        format!("{}MB", bytes / 1_000_000)
    } else if bytes >= 1024 {
        format!("{}KiB", bytes / 1024)
    } else {
        format!("{bytes}B")
    }
}

fn sse_workload(name: String, input: &Bytes, chunk: usize, peers: &[SseImpl]) -> Workload {
    let chunks = Rc::new(chunked(input, chunk));
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

    // eventsource-stream re-scans an event's whole buffer per chunk (quadratic: about 400 s per
    // run at 16 MiB), so it is measured on a smaller single event only.
    let linear: Vec<SseImpl> = all
        .into_iter()
        .filter(|imp| *imp != SseImpl::EventsourceStream)
        .collect();
    for (size, peers, note) in [
        (
            sizes.large_event,
            &linear[..],
            " (eventsource-stream omitted: quadratic)",
        ),
        (sizes.small_event, &all[..], ""),
    ] {
        let large = single_large_event(size);
        let mut workload = sse_workload(
            format!("sse/single-{}/1460B{note}", label(size)),
            &large,
            1460,
            peers,
        );
        let chunks = chunked(&large, 1460);
        let mut copy = Vec::with_capacity(large.len());
        workload.cases.push(
            Case::new("memcpy (floor)", move || {
                copy.clear();
                for chunk in &chunks {
                    copy.extend_from_slice(chunk);
                }
                // The copy itself is kept, not only its length.
                std::hint::black_box(&copy);
                1
            })
            .unchecked(),
        );
        out.push(workload);
    }

    let openai = openai_chat_stream(7, sizes.anthropic);
    out.push(sse_workload(
        format!("sse/openai-chat-{}/1460B", label(sizes.anthropic)),
        &openai,
        1460,
        &all,
    ));
    out
}

/// Decoding workloads: the Anthropic-shaped and OpenAI-chat-shaped streams (ferroloop against
/// the naive `serde_json::Value` per event, over the SSE framing floor), and a large tool input
/// in 1-character deltas, accumulated and viewed live.
pub fn decode_workloads(sizes: Sizes) -> Vec<Workload> {
    const CHUNK: usize = 16 * 1024;
    let mut out = Vec::new();

    let anthropic = anthropic_stream(42, sizes.anthropic);
    let chunks = Rc::new(chunked(&anthropic, CHUNK));
    let events = SseImpl::Ferroloop.parse(&chunks).events;
    let checksum =
        |summary: DecodeSummary| (summary.blocks * 1_000_000_000 + summary.text_bytes) as u64;
    let cases = [
        DecodeImpl::FerroloopEvents,
        DecodeImpl::FerroloopAccumulate,
        DecodeImpl::NaiveValue,
        DecodeImpl::SseOnly,
    ]
    .into_iter()
    .map(|imp| {
        let chunks = chunks.clone();
        let case = Case::new(imp.name(), move || {
            checksum(imp.decode_anthropic_summary(&chunks))
        });
        if imp == DecodeImpl::SseOnly {
            case.unchecked()
        } else {
            case
        }
    })
    .collect();
    out.push(Workload {
        name: format!("decode/anthropic-{}/16KiB", label(sizes.anthropic)),
        unit: Unit::Bytes(anthropic.len() as u64),
        events,
        cases,
        same_checksum: true,
    });

    let openai = openai_chat_stream(7, sizes.anthropic);
    let chunks = Rc::new(chunked(&openai, CHUNK));
    let events = SseImpl::Ferroloop.parse(&chunks).events;
    let (a, b, c, d, e) = (
        chunks.clone(),
        chunks.clone(),
        chunks.clone(),
        chunks.clone(),
        chunks,
    );
    out.push(Workload {
        name: format!("decode/openai-chat-{}/16KiB", label(sizes.anthropic)),
        unit: Unit::Bytes(openai.len() as u64),
        events,
        cases: vec![
            Case::new("ferroloop (events)", move || {
                ferroloop_openai_chat(&a, true)
            }),
            Case::new("ferroloop (accumulate only)", move || {
                ferroloop_openai_chat(&b, false)
            }),
            Case::new("ferroloop (serde borrowed, no template)", move || {
                ferroloop_openai_chat_serde(&c)
            }),
            Case::new("naive serde_json::Value per event", move || {
                naive_openai_chat(&d)
            }),
            Case::new("SSE framing only (floor)", move || {
                SseImpl::Ferroloop.parse(&e).events
            })
            .unchecked(),
        ],
        same_checksum: true,
    });

    // The same stream with OpenAI's per-chunk `obfuscation` padding (the API's default since
    // 2025): the chunks differ in two strings, not one.
    let padded = openai_chat_stream_obfuscated(7, sizes.anthropic);
    let chunks = Rc::new(chunked(&padded, CHUNK));
    let events = SseImpl::Ferroloop.parse(&chunks).events;
    let (a, b, c) = (chunks.clone(), chunks.clone(), chunks);
    out.push(Workload {
        name: format!(
            "decode/openai-chat-obfuscated-{}/16KiB",
            label(sizes.anthropic)
        ),
        unit: Unit::Bytes(padded.len() as u64),
        events,
        cases: vec![
            Case::new("ferroloop (accumulate only)", move || {
                ferroloop_openai_chat(&a, false)
            }),
            Case::new("ferroloop (serde borrowed, no template)", move || {
                ferroloop_openai_chat_serde(&b)
            }),
            Case::new("naive serde_json::Value per event", move || {
                naive_openai_chat(&c)
            }),
        ],
        same_checksum: true,
    });

    let (stream, _) = tool_input_stream(sizes.tool_input);
    let chunks = Rc::new(chunked(&stream, CHUNK));
    let events = SseImpl::Ferroloop.parse(&chunks).events;
    let (a, b, c) = (chunks.clone(), chunks.clone(), chunks);
    out.push(Workload {
        name: format!(
            "decode/tool-input-{}/1-char-deltas",
            label(sizes.tool_input)
        ),
        unit: Unit::Bytes(stream.len() as u64),
        events,
        cases: vec![
            Case::new("ferroloop (accumulate, parse at end)", move || {
                tool_input::ferroloop_accumulate(&a)
            }),
            Case::new("ferroloop (+ live view every delta)", move || {
                tool_input::ferroloop_view_each(&b, true)
            }),
            Case::new("naive Value per event, parse at end", move || {
                tool_input::naive_accumulate(&c)
            }),
        ],
        same_checksum: true,
    });

    let (stream, _) = tool_input_stream(sizes.tool_view);
    let chunks = Rc::new(chunked(&stream, CHUNK));
    let events = SseImpl::Ferroloop.parse(&chunks).events;
    let (a, b) = (chunks.clone(), chunks);
    out.push(Workload {
        name: format!(
            "decode/tool-input-{}/1-char-deltas/live-view (naive is quadratic)",
            label(sizes.tool_view)
        ),
        unit: Unit::Bytes(stream.len() as u64),
        events,
        cases: vec![
            Case::new("ferroloop (incremental view)", move || {
                tool_input::ferroloop_view_each(&a, false)
            }),
            Case::new("naive re-scan whole buffer per delta", move || {
                tool_input::naive_rescan_each(&b)
            }),
        ],
        same_checksum: true,
    });
    out
}

/// Token counting on the mixed corpus: ferroloop's estimate, tiktoken-rs exact o200k, a
/// chars/4 pass, and a plain byte pass (newlines counted with memchr: the floor).
pub fn token_workloads(sizes: Sizes) -> Vec<Workload> {
    let corpus = Rc::new(mixed_corpus(sizes.token_corpus));
    if corpus.is_empty() {
        return Vec::new();
    }
    let (a, b, c, d) = (
        corpus.clone(),
        corpus.clone(),
        corpus.clone(),
        corpus.clone(),
    );
    vec![Workload {
        name: format!("tokens/mixed-{}", label(sizes.token_corpus)),
        unit: Unit::Bytes(corpus.len() as u64),
        events: 0,
        cases: vec![
            Case::new("ferroloop estimate_text (o200k)", move || {
                estimate_text(&a, Family::O200k)
            }),
            Case::new("tiktoken-rs o200k (exact)", move || {
                tiktoken_rs::o200k_base_singleton()
                    .encode_ordinary(&b)
                    .len() as u64
            }),
            Case::new("chars/4", move || (c.chars().count() / 4) as u64),
            Case::new("byte pass: memchr newlines (floor)", move || {
                memchr::memchr_iter(b'\n', d.as_bytes()).count() as u64
            }),
        ],
        same_checksum: false,
    }]
}

fn noop_tool() -> impl Tool {
    FnTool::new("noop", |_, _| async { Ok(ToolOutput::text(String::new())) }).concurrency_safe(true)
}

fn noop_calls(n: usize) -> Vec<ToolUse> {
    (0..n)
        .map(|i| ToolUse::new(format!("toolu_{i:06}"), "noop", serde_json::json!({})))
        .collect()
}

fn current_thread() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()
}

/// The tool executor: no-op calls in one turn against a bare `join_all` over the same tool
/// futures (the floor), and safe sleeping tools run concurrently (the ideal is one sleep).
pub fn exec_workloads(sizes: Sizes) -> Vec<Workload> {
    let mut out = Vec::new();
    let n = sizes.noop_calls;
    let (Some(rt_run), Some(rt_floor)) = (current_thread(), current_thread()) else {
        return out;
    };
    let mut tools = ToolRegistry::new();
    if tools.register(noop_tool()).is_err() {
        return out;
    }
    let config = ExecutorConfig {
        budget: BudgetConfig {
            turn_budget_chars: None,
            ..BudgetConfig::default()
        },
        ..ExecutorConfig::default()
    };
    let executor = ToolExecutor::builder(tools).config(config).build();
    let tool = noop_tool();
    let token = CancellationToken::new();
    out.push(Workload {
        name: format!("exec/noop-{n}-calls-per-turn"),
        unit: Unit::Ops(n as u64),
        events: n as u64,
        cases: vec![
            Case::batched(
                "ferroloop ToolExecutor::run",
                move || noop_calls(n),
                move |uses| {
                    rt_run
                        .block_on(executor.run(uses))
                        .map_or(0, |results| results.len() as u64)
                },
            ),
            Case::batched(
                "futures::join_all (floor)",
                move || noop_calls(n),
                move |uses| {
                    let futures = uses.into_iter().map(|u| {
                        let ctx = ToolContext::standalone(u.id.clone(), token.clone());
                        let future = tool.call(u.input, ctx);
                        async move {
                            let output = future.await.ok()?;
                            Some(ToolResult {
                                tool_use_id: u.id,
                                content: output.content,
                                is_error: output.is_error,
                            })
                        }
                    });
                    let results = rt_floor.block_on(futures::future::join_all(futures));
                    results.iter().flatten().count() as u64
                },
            ),
        ],
        same_checksum: true,
    });

    let (count, sleep) = (sizes.sleep_tools, sizes.sleep);
    let (Some(rt_run), Some(rt_floor)) = (current_thread(), current_thread()) else {
        return out;
    };
    let mut tools = ToolRegistry::new();
    let sleeper = move || {
        FnTool::new("sleep", move |_, _| async move {
            tokio::time::sleep(sleep).await;
            Ok(ToolOutput::text("slept"))
        })
        .concurrency_safe(true)
    };
    if tools.register(sleeper()).is_err() {
        return out;
    }
    let executor = ToolExecutor::new(tools);
    let sleep_calls = move || -> Vec<ToolUse> {
        (0..count)
            .map(|i| ToolUse::new(format!("s{i}"), "sleep", serde_json::json!({})))
            .collect()
    };
    let tool = sleeper();
    let token = CancellationToken::new();
    out.push(Workload {
        name: format!(
            "exec/{count}-safe-tools-sleeping-{}ms (ideal {}ms)",
            sleep.as_millis(),
            sleep.as_millis()
        ),
        unit: Unit::Run,
        events: count as u64,
        cases: vec![
            Case::batched("ferroloop ToolExecutor::run", sleep_calls, move |uses| {
                rt_run
                    .block_on(executor.run(uses))
                    .map_or(0, |results| results.len() as u64)
            }),
            Case::batched("futures::join_all (floor)", sleep_calls, move |uses| {
                let futures = uses.into_iter().map(|u| {
                    let ctx = ToolContext::standalone(u.id.clone(), token.clone());
                    tool.call(u.input, ctx)
                });
                let results = rt_floor.block_on(futures::future::join_all(futures));
                results.iter().filter(|r| r.is_ok()).count() as u64
            }),
        ],
        same_checksum: true,
    });
    out
}

/// Every workload at `sizes`, filtered by a substring of its name.
pub fn suite_with(sizes: Sizes, filter: Option<&str>) -> Vec<Workload> {
    const GROUPS: [&str; 4] = ["sse", "decode", "tokens", "exec"];
    // Inputs are large: a filter naming another group skips generating this one's.
    let wanted = |group: &str| match filter {
        Some(f) if GROUPS.iter().any(|g| f.starts_with(g)) => f.starts_with(group),
        _ => true,
    };
    let mut all = Vec::new();
    if wanted("sse") {
        all.extend(sse_workloads(sizes));
    }
    if wanted("decode") {
        all.extend(decode_workloads(sizes));
    }
    if wanted("tokens") {
        all.extend(token_workloads(sizes));
    }
    if wanted("exec") {
        all.extend(exec_workloads(sizes));
    }
    if let Some(filter) = filter {
        all.retain(|w| w.name.contains(filter));
    }
    all
}

/// Every workload (full sizes, or smaller ones for `--quick`), filtered by a substring of its
/// name.
pub fn suite(quick: bool, filter: Option<&str>) -> Vec<Workload> {
    suite_with(Sizes::new(quick), filter)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::runner::{RunOptions, run};

    /// The whole suite, on tiny inputs and one round: every workload generates, every
    /// implementation runs, checked implementations agree, and ratios come out.
    #[test]
    fn the_whole_suite_runs_on_tiny_inputs() {
        let mut workloads = suite_with(Sizes::tiny(), None);
        let names: Vec<&str> = workloads.iter().map(|w| w.name.as_str()).collect();
        for group in ["sse/", "decode/", "tokens/", "exec/"] {
            assert!(
                names.iter().any(|n| n.starts_with(group)),
                "{group}: {names:?}"
            );
        }
        assert!(names.iter().any(|n| n.contains("tool-input")), "{names:?}");
        let options = RunOptions {
            rounds: 1,
            min_sample_time: Duration::from_millis(1),
        };
        let rows = run(&mut workloads, &options, |_, _, _| {}).unwrap();
        let cases: usize = workloads.iter().map(|w| w.cases.len()).sum();
        assert_eq!(rows.len(), cases);
        for row in &rows {
            assert!(row.median.is_finite() && row.median > 0.0, "{row:?}");
            assert!(row.ferroloop_speedup.is_finite(), "{row:?}");
        }
        let first = |name: &str| rows.iter().find(|r| r.workload.starts_with(name)).unwrap();
        // Sanity of the checksums each workload compares.
        assert_eq!(first("exec/noop").checksum, Sizes::tiny().noop_calls as u64);
        assert_eq!(first("exec/3-safe").checksum, 3);
        assert!(first("decode/anthropic").checksum > 0);
        assert!(first("decode/openai-chat").checksum > 0);
        assert!(first("decode/openai-chat-obfuscated").checksum > 0);
        assert!(first("decode/tool-input").checksum > 0);
        // The sleeping tools ran concurrently: one sleep, not three.
        let sleep = first("exec/3-safe");
        assert!(sleep.unit == "ms/run" && sleep.median >= 2.0, "{sleep:?}");
    }

    #[test]
    fn a_filter_naming_a_group_builds_only_that_group() {
        let workloads = suite_with(Sizes::tiny(), Some("exec/noop"));
        assert_eq!(workloads.len(), 1);
        assert!(workloads[0].name.starts_with("exec/noop"));
        assert!(suite_with(Sizes::tiny(), Some("no-such-workload")).is_empty());
        let by_chunk = suite_with(Sizes::tiny(), Some("16KiB"));
        assert!(by_chunk.iter().any(|w| w.name.starts_with("sse/")));
        assert!(by_chunk.iter().any(|w| w.name.starts_with("decode/")));
    }
}
