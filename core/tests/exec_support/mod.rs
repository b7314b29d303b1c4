//! Shared instrumentation for the executor tests: a probe that counts running tools, detects
//! overlaps and logs starts and ends, and a scripted tool driven by its input.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferroloop::exec::{FnTool, ResultLimit, ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::{Value, json};

/// Counts running tool bodies and detects cap and exclusivity violations.
#[derive(Default)]
pub struct Probe {
    running: AtomicUsize,
    exclusive_running: AtomicBool,
    pub max_running: AtomicUsize,
    pub overlap: AtomicBool,
    pub live_futures: AtomicUsize,
    pub log: Mutex<Vec<String>>,
}

/// Marks a tool body as running until dropped (completion, cancellation or drop).
pub struct Running {
    probe: Arc<Probe>,
    name: String,
    exclusive: bool,
}

impl Probe {
    pub fn enter(self: &Arc<Self>, name: &str, exclusive: bool) -> Running {
        let before = self.running.fetch_add(1, Ordering::SeqCst);
        if (exclusive && before > 0) || self.exclusive_running.load(Ordering::SeqCst) {
            self.overlap.store(true, Ordering::SeqCst);
        }
        if exclusive {
            self.exclusive_running.store(true, Ordering::SeqCst);
        }
        self.max_running.fetch_max(before + 1, Ordering::SeqCst);
        self.log.lock().unwrap().push(format!("start {name}"));
        Running {
            probe: self.clone(),
            name: name.to_owned(),
            exclusive,
        }
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    pub fn max(&self) -> usize {
        self.max_running.load(Ordering::SeqCst)
    }

    pub fn overlapped(&self) -> bool {
        self.overlap.load(Ordering::SeqCst)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.exclusive {
            self.probe.exclusive_running.store(false, Ordering::SeqCst);
        }
        self.probe.running.fetch_sub(1, Ordering::SeqCst);
        self.probe
            .log
            .lock()
            .unwrap()
            .push(format!("end {}", self.name));
    }
}

/// Counts live tool futures (created by `call`, dropped when done or dropped).
pub struct Live(Arc<Probe>);

impl Live {
    pub fn new(probe: &Arc<Probe>) -> Self {
        probe.live_futures.fetch_add(1, Ordering::SeqCst);
        Self(probe.clone())
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.live_futures.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What a scripted call does, read from its input:
/// `{"label": "r1", "safe": true, "ms": 10, "outcome": "ok"|"err"|"fatal"|"panic"|"hang"|"ignore_cancel"}`.
pub async fn scripted(
    probe: Arc<Probe>,
    input: Value,
    ctx: ToolContext,
) -> Result<ToolOutput, ToolError> {
    let _live = Live::new(&probe);
    let label = input["label"].as_str().unwrap_or("?").to_owned();
    let safe = input["safe"].as_bool().unwrap_or(false);
    let ms = input["ms"].as_u64().unwrap_or(0);
    let outcome = input["outcome"].as_str().unwrap_or("ok").to_owned();
    let _running = probe.enter(&label, !safe);
    match outcome.as_str() {
        "ignore_cancel" => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return Ok(ToolOutput::text(format!("{label} finished late")));
        }
        "hang" => {
            ctx.cancelled().await;
            return Err(ToolError::failed("cancelled"));
        }
        _ => {}
    }
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(ms)) => {}
        () = ctx.cancelled() => return Err(ToolError::failed(format!("{label} saw cancellation"))),
    }
    match outcome.as_str() {
        "err" => Err(ToolError::failed(format!("{label} failed"))),
        "fatal" => Err(ToolError::fatal(format!("{label} failed fatally"))),
        "panic" => panic!("{label} panicked"),
        _ => Ok(ToolOutput::text(format!("{label} ok"))),
    }
}

/// A registry with `script` (no timeout), `timed` (30 ms timeout) and `shell` (cancels siblings
/// on error) tools, all running `scripted`.
pub fn registry(probe: &Arc<Probe>) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    let safe_when = |input: &Value| input["safe"].as_bool().unwrap_or(false);
    let p = probe.clone();
    registry
        .register(
            FnTool::new("script", move |input, ctx| scripted(p.clone(), input, ctx))
                .safe_when(safe_when)
                .schema(json!({"type": "object", "properties": {"label": {"type": "string"}}})),
        )
        .unwrap();
    let p = probe.clone();
    registry
        .register(
            FnTool::new("timed", move |input, ctx| scripted(p.clone(), input, ctx))
                .safe_when(safe_when)
                .with_timeout(Duration::from_millis(30)),
        )
        .unwrap();
    let p = probe.clone();
    registry
        .register(
            FnTool::new("shell", move |input, ctx| scripted(p.clone(), input, ctx))
                .safe_when(safe_when)
                .with_sibling_cancellation(true)
                .with_result_limit(ResultLimit::Default),
        )
        .unwrap();
    registry
}

/// A scripted call.
pub fn call(id: &str, tool: &str, safe: bool, ms: u64, outcome: &str) -> ferroloop::exec::ToolUse {
    ferroloop::exec::ToolUse::new(
        id,
        tool,
        json!({"label": id, "safe": safe, "ms": ms, "outcome": outcome}),
    )
}

/// The text of a result.
pub fn text(result: &ferroloop::exec::ToolResult) -> &str {
    match &result.content {
        ferroloop::exec::ToolResultContent::Text(text) => text,
        ferroloop::exec::ToolResultContent::Blocks(_) => "<blocks>",
    }
}
