//! The README's Rust examples, compiled and run here so they cannot rot.
//!
//! Each `rust` block of the README appears below verbatim (compared line by line with leading
//! whitespace ignored), wrapped in what makes it a program: the input it reads and checks of what
//! it produced. `every_readme_rust_block_is_compiled_here` fails when a README block is edited
//! without its copy here, or when a block is added without a test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The README's ```rust blocks, each as its lines with leading whitespace removed.
fn readme_rust_blocks() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_start()) {
            (None, "```rust") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.extend(current.take()),
            (Some(block), text) => block.push(text.to_owned()),
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_readme_rust_block_is_compiled_here() {
    let this_file = include_str!("readme_examples.rs");
    let ours: Vec<&str> = this_file.lines().map(str::trim_start).collect();
    let blocks = readme_rust_blocks();
    assert_eq!(blocks.len(), 3, "a README rust block was added or removed");
    for block in blocks {
        let found = ours
            .windows(block.len())
            .any(|window| window.iter().zip(&block).all(|(a, b)| a == b));
        assert!(
            found,
            "README block not compiled by this file:\n{}",
            block.join("\n")
        );
    }
}

#[test]
#[rustfmt::skip]
fn readme_sse_example() {
    // The block prints; here its `println!` records the lines instead.
    let mut printed: Vec<String> = Vec::new();
    macro_rules! println {
        ($($arg:tt)*) => { printed.push(format!($($arg)*)) };
    }

    use bytes::Bytes;
    use ferroloop::sse::{SseItem, SseParser};

    let mut parser = SseParser::new();
    parser.feed(Bytes::from_static(b"event: content_block_delta\ndata: {\"text\":\"Hi\"}\n\n"));
    while let Some(item) = parser.next_item() {
        match item {
            SseItem::Event(event) => println!("{} {}", event.event_type(), event.data()),
            SseItem::Retry(ms) => println!("retry {ms} ms"),
        }
    }
    parser.finish(); // end of input: an unterminated event is discarded

    assert_eq!(printed, ["content_block_delta {\"text\":\"Hi\"}"]);
}

#[test]
#[rustfmt::skip]
#[allow(unused_variables, clippy::never_loop)]
fn readme_decode_example() -> Result<(), Box<dyn std::error::Error>> {
    let stream = std::fs::read(repo_root().join("tests/fixtures/anthropic/tool_use_response.sse"))?;
    let chunks: Vec<Vec<u8>> = stream.chunks(7).map(<[u8]>::to_vec).collect();

    use bytes::Bytes;
    use ferroloop::decode::{Provider, StreamDecoder};

    let mut decoder = StreamDecoder::for_provider(Provider::Anthropic);
    for chunk in chunks {                       // bytes from the network, split anywhere
        for event in decoder.feed(Bytes::from(chunk))? {
            // text_delta, tool_use_ready (a sealed tool call, input parsed once), ...
        }
    }
    let message = decoder.finish()?;            // or DecodeError::Truncated { partial, .. }

    assert_eq!(message["stop_reason"], "tool_use");
    let content = message["content"].as_array().unwrap();
    assert!(content.iter().any(|block| block["type"] == "tool_use"));
    Ok(())
}

#[tokio::test]
#[rustfmt::skip]
async fn readme_executor_example() -> Result<(), Box<dyn std::error::Error>> {
    use ferroloop::exec::{FnTool, ToolExecutor, ToolOutput, ToolRegistry, ToolUse};

    let mut tools = ToolRegistry::new();
    tools.register(
        FnTool::new("read", |input, _ctx| async move { Ok(ToolOutput::text(format!("read {}", input["path"]))) })
            .concurrency_safe(true),
    )?;
    let executor = ToolExecutor::new(tools);
    let results = executor.run(vec![ToolUse::new("t1", "read", serde_json::json!({"path": "a"}))]).await?;

    assert_eq!(results.len(), 1);
    let result = serde_json::to_value(&results[0])?;
    assert_eq!(result["tool_use_id"], "t1");
    assert_eq!(result["content"], "read \"a\"");
    assert_ne!(result["is_error"], true);
    Ok(())
}
