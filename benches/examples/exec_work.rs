//! Runs the executor (or the `join_all` floor) over no-op tools a fixed number of times, for
//! counting instructions under `valgrind --tool=callgrind` (deterministic, unlike wall time on
//! a shared machine):
//!
//! ```text
//! cargo build --release -p ferroloop-bench --example exec_work
//! valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     target/release/examples/exec_work run 10000 3
//! ```
//!
//! Modes: `setup` (only builds the calls), `floor` (join_all over the tool futures), `run`
//! (`ToolExecutor::run`), `spawned` (`run` with `spawn_calls`), `turn` (streaming turn with
//! events). Subtract `setup` from the others and divide by `n × iterations`.
//!
//! Calls pending on their first poll and answered by one external batch (the bindings' host
//! tools, see `ferroloop_bench::batch_tool`): `pending-floor` (join_all over those futures) and
//! `pending-run` (`ToolExecutor::run`), both driven by `batch_tool::drive`.
//! `benches/callgrind-exec.sh` runs every mode and prints instructions per call.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use ferroloop::exec::{
    BudgetConfig, CancellationToken, ExecutorConfig, FnTool, Tool, ToolContext, ToolExecutor,
    ToolOutput, ToolRegistry, ToolResult, ToolUse,
};
use ferroloop_bench::batch_tool::{BatchReplies, batch_tool, drive};
use serde_json::json;

fn noop_tool() -> impl Tool {
    FnTool::new("noop", |_, _| async { Ok(ToolOutput::text(String::new())) }).concurrency_safe(true)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map_or("run", String::as_str).to_owned();
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let iterations: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(3);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let host = BatchReplies::new();
    let mut tools = ToolRegistry::new();
    tools.register(noop_tool()).unwrap();
    tools.register(batch_tool("wait", &host)).unwrap();
    let config = ExecutorConfig {
        spawn_calls: mode == "spawned",
        budget: BudgetConfig {
            turn_budget_chars: None,
            ..BudgetConfig::default()
        },
        ..ExecutorConfig::default()
    };
    let exec = ToolExecutor::builder(tools).config(config).build();
    let tool = noop_tool();
    let waiting_tool = batch_tool("wait", &host);
    let pending = mode.starts_with("pending");
    let token = CancellationToken::new();
    let mut answered = 0usize;
    for _ in 0..iterations {
        let uses: Vec<ToolUse> = (0..n)
            .map(|i| {
                let name = if pending { "wait" } else { "noop" };
                ToolUse::new(format!("toolu_{i:06}"), name, json!({}))
            })
            .collect();
        answered += runtime.block_on(async {
            match mode.as_str() {
                "setup" => uses.len(),
                "floor" => {
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
                    futures::future::join_all(futures).await.len()
                }
                "pending-floor" => {
                    let futures = uses.into_iter().map(|u| {
                        let ctx = ToolContext::standalone(u.id.clone(), token.clone());
                        let future = waiting_tool.call(u.input, ctx);
                        async move {
                            let output = future.await.unwrap();
                            ToolResult {
                                tool_use_id: u.id,
                                content: output.content,
                                is_error: output.is_error,
                            }
                        }
                    });
                    drive(&host, futures::future::join_all(futures)).await.len()
                }
                "pending-run" => drive(&host, exec.run(uses)).await.unwrap().len(),
                "turn" => {
                    let mut turn = exec.turn();
                    for u in uses {
                        turn.submit(u).unwrap();
                    }
                    turn.seal();
                    while turn.next_event().await.is_some() {}
                    turn.finish().await.unwrap().len()
                }
                _ => exec.run(uses).await.unwrap().len(),
            }
        });
    }
    assert_eq!(answered, n * iterations);
}
