//! Property test: random mixes of safe and exclusive calls with random failures, panics,
//! timeouts, sibling failures, fatal errors, streaming delays, turn cancellation, inline or
//! spawned calls. Always:
//! exactly one result per call in submission order, one `Finished` per call, the cap is never
//! exceeded and an exclusive call never overlaps another.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod exec_support;

use std::sync::Arc;
use std::time::Duration;

use exec_support::{Probe, call, registry};
use ferroloop::exec::{ExecutorConfig, ToolExecutor, TurnError, TurnEvent};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Spec {
    tool: &'static str,
    safe: bool,
    ms: u64,
    outcome: &'static str,
    delay_ms: u64,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![Just("script"), Just("timed"), Just("shell")],
        any::<bool>(),
        0u64..60,
        prop_oneof![
            6 => Just("ok"),
            2 => Just("err"),
            1 => Just("panic"),
            1 => Just("hang"),
            1 => Just("fatal"),
        ],
        prop_oneof![3 => Just(0u64), 1 => 0u64..20],
    )
        .prop_map(|(tool, safe, ms, outcome, delay_ms)| {
            // A hanging call needs a timeout to end unless the turn is cancelled.
            let tool = if outcome == "hang" { "timed" } else { tool };
            Spec {
                tool,
                safe,
                ms,
                outcome,
                delay_ms,
            }
        })
}

fn run_case(
    specs: &[Spec],
    cap: usize,
    cancel_at: Option<u64>,
    spawn_calls: bool,
) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let probe = Arc::new(Probe::default());
    let config = ExecutorConfig {
        max_concurrency: cap,
        spawn_calls,
        ..ExecutorConfig::default()
    };
    let exec = ToolExecutor::builder(registry(&probe))
        .config(config)
        .build();
    let (events, outcome) = runtime.block_on(async {
        let mut turn = exec.turn().spawn();
        let handle = turn.handle().clone();
        if let Some(at) = cancel_at {
            let handle = handle.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(at)).await;
                handle.cancel();
            });
        }
        let submitter = {
            let specs = specs.to_vec();
            tokio::spawn(async move {
                for (i, spec) in specs.iter().enumerate() {
                    tokio::time::sleep(Duration::from_millis(spec.delay_ms)).await;
                    let id = format!("c{i}");
                    handle
                        .submit(call(&id, spec.tool, spec.safe, spec.ms, spec.outcome))
                        .unwrap();
                }
                handle.seal();
            })
        };
        let mut events = Vec::new();
        while let Some(event) = turn.next_event().await {
            events.push(event);
        }
        submitter.await.unwrap();
        (events, turn.finish().await)
    });

    let results = match outcome {
        Ok(results) => results,
        Err(TurnError::Fatal { results, .. }) => {
            prop_assert!(specs.iter().any(|s| s.outcome == "fatal"));
            results
        }
        Err(other) => return Err(TestCaseError::fail(format!("unexpected {other:?}"))),
    };
    prop_assert_eq!(results.len(), specs.len());
    for (i, result) in results.iter().enumerate() {
        prop_assert_eq!(&result.tool_use_id, &format!("c{i}"));
        if specs[i].outcome != "ok" {
            prop_assert!(result.is_error, "call {} ({:?}) must fail", i, specs[i]);
        }
    }
    let disturbed = cancel_at.is_some()
        || specs.iter().any(|s| {
            s.outcome == "fatal"
                || (s.tool == "shell" && s.outcome != "ok")
                || (s.tool == "shell" && s.ms >= 30)
        });
    if !disturbed {
        for (i, result) in results.iter().enumerate() {
            let spec = &specs[i];
            let times_out = spec.tool == "timed" && spec.ms >= 30;
            if spec.outcome == "ok" && !times_out {
                prop_assert!(
                    !result.is_error,
                    "call {} ({:?}) must succeed: {:?}",
                    i,
                    spec,
                    result
                );
            }
        }
    }
    let mut finished = vec![0usize; specs.len()];
    let mut delivered = Vec::new();
    for event in &events {
        match event {
            TurnEvent::Finished { index, .. } => finished[*index] += 1,
            TurnEvent::Result { index, .. } => delivered.push(*index),
            _ => {}
        }
    }
    prop_assert!(
        finished.iter().all(|&n| n == 1),
        "finished counts {:?}",
        finished
    );
    prop_assert_eq!(delivered, (0..specs.len()).collect::<Vec<_>>());
    prop_assert!(
        probe.max() <= cap,
        "max running {} > cap {}",
        probe.max(),
        cap
    );
    prop_assert!(!probe.overlapped(), "an exclusive call overlapped another");
    prop_assert_eq!(
        probe.live_futures.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_mixes_keep_the_contract(
        specs in prop::collection::vec(spec(), 1..25),
        cap in 1usize..6,
        cancel_at in prop::option::weighted(0.25, 0u64..80),
        spawn_calls in prop::bool::weighted(0.25),
    ) {
        run_case(&specs, cap, cancel_at, spawn_calls)?;
    }
}
