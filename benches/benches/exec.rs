//! Tool executor overhead: no-op tools at 1, 10 and 10,000 calls per turn, against the floor of
//! a plain `join_all` over the same tool futures; and the parallel speedup of 10 safe tools
//! sleeping 100 ms.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ferroloop::exec::{
    CancellationToken, ExecutorConfig, FnTool, Tool, ToolContext, ToolExecutor, ToolOutput,
    ToolRegistry, ToolResult, ToolUse,
};
use serde_json::json;

fn noop_tool() -> impl Tool {
    FnTool::new("noop", |_, _| async { Ok(ToolOutput::text(String::new())) }).concurrency_safe(true)
}

fn calls(n: usize) -> Vec<ToolUse> {
    (0..n)
        .map(|i| ToolUse::new(format!("toolu_{i:06}"), "noop", json!({})))
        .collect()
}

fn executor(spawn_calls: bool) -> ToolExecutor {
    let mut tools = ToolRegistry::new();
    tools.register(noop_tool()).unwrap();
    let config = ExecutorConfig {
        spawn_calls,
        budget: ferroloop::exec::BudgetConfig {
            turn_budget_chars: None,
            ..Default::default()
        },
        ..ExecutorConfig::default()
    };
    ToolExecutor::builder(tools).config(config).build()
}

fn overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tool = noop_tool();
    let inline = executor(false);
    let spawned = executor(true);
    let mut group = c.benchmark_group("exec_noop");
    for n in [1usize, 10, 10_000] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("join_all_floor", n), &n, |b, &n| {
            let token = CancellationToken::new();
            b.iter_batched(
                || calls(n),
                |uses| {
                    runtime.block_on(async {
                        let futures = uses.into_iter().map(|u| {
                            let ctx = ToolContext::standalone(u.id.clone(), token.clone());
                            let future = tool.call(u.input, ctx);
                            async move {
                                let output = future.await.unwrap();
                                ToolResult {
                                    tool_use_id: u.id,
                                    content: output.content,
                                    is_error: output.is_error,
                                }
                            }
                        });
                        futures::future::join_all(futures).await
                    })
                },
                BatchSize::SmallInput,
            );
        });
        group.bench_with_input(BenchmarkId::new("executor_run", n), &n, |b, &n| {
            b.iter_batched(
                || calls(n),
                |uses| runtime.block_on(inline.run(uses)).unwrap(),
                BatchSize::SmallInput,
            );
        });
        group.bench_with_input(BenchmarkId::new("executor_run_spawned", n), &n, |b, &n| {
            b.iter_batched(
                || calls(n),
                |uses| runtime.block_on(spawned.run(uses)).unwrap(),
                BatchSize::SmallInput,
            );
        });
        group.bench_with_input(BenchmarkId::new("executor_turn_events", n), &n, |b, &n| {
            b.iter_batched(
                || calls(n),
                |uses| {
                    runtime.block_on(async {
                        let mut turn = inline.turn();
                        for u in uses {
                            turn.submit(u).unwrap();
                        }
                        turn.seal();
                        let mut events = 0usize;
                        while turn.next_event().await.is_some() {
                            events += 1;
                        }
                        (events, turn.finish().await.unwrap())
                    })
                },
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();
}

fn parallel_sleep(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("sleep", |_, _| async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok(ToolOutput::text("slept"))
            })
            .concurrency_safe(true),
        )
        .unwrap();
    let exec = ToolExecutor::new(tools);
    let mut group = c.benchmark_group("exec_parallel");
    group.sample_size(10);
    group.bench_function("10_safe_sleep_100ms", |b| {
        b.iter(|| {
            let uses = (0..10)
                .map(|i| ToolUse::new(format!("s{i}"), "sleep", json!({})))
                .collect();
            runtime.block_on(exec.run(uses)).unwrap()
        });
    });
    group.finish();
}

criterion_group!(benches, overhead, parallel_sleep);
criterion_main!(benches);
