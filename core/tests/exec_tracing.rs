//! Every call runs inside a `tool_call` tracing span carrying the tool, the call id and the index.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ferroloop::exec::{FnTool, ToolExecutor, ToolOutput, ToolRegistry, ToolUse};
use serde_json::json;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[derive(Default)]
struct SpanRecorder {
    next: AtomicU64,
    spans: Mutex<Vec<String>>,
}

struct Fields(String);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!(" {}={:?}", field.name(), value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push_str(&format!(" {}={}", field.name(), value));
    }
}

impl Subscriber for &'static SpanRecorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut fields = Fields(attrs.metadata().name().to_owned());
        attrs.record(&mut fields);
        self.spans.lock().unwrap().push(fields.0);
        Id::from_u64(self.next.fetch_add(1, Ordering::SeqCst) + 1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, _: &Event<'_>) {}

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

#[test]
fn each_call_gets_a_tool_call_span() {
    let recorder: &'static SpanRecorder = Box::leak(Box::default());
    let mut tools = ToolRegistry::new();
    tools
        .register(
            FnTool::new("echo", |_, _| async { Ok(ToolOutput::text("ok")) }).concurrency_safe(true),
        )
        .unwrap();
    let exec = ToolExecutor::new(tools);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::subscriber::with_default(recorder, || {
        runtime.block_on(async {
            exec.run(vec![
                ToolUse::new("t1", "echo", json!({})),
                ToolUse::new("t2", "echo", json!({})),
            ])
            .await
            .unwrap();
        });
    });
    let spans = recorder.spans.lock().unwrap().clone();
    assert_eq!(
        spans,
        [
            "tool_call tool=echo tool_use_id=t1 index=0",
            "tool_call tool=echo tool_use_id=t2 index=1"
        ]
    );
}
