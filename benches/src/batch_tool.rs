//! A tool whose calls are *pending on their first poll* and answered later by an external batch,
//! the way the language bindings' host tools are (a JS promise or a Python coroutine settles on
//! the host's loop; the replies come back in one batch that wakes every waiting call).
//!
//! [`BatchReplies`] plays the host: a call registers its waker on its first poll; the driver
//! ([`drive`]) polls the future under test and, whenever it is pending, answers every waiting
//! call at once (one lock, one wake each) and polls again. Executor and floor are driven the same
//! way, so the difference is the executor's cost for calls that wait.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use ferroloop::exec::{FnTool, Tool, ToolError, ToolOutput};

/// The host side: the wakers of the calls waiting for their reply, and a batch counter.
#[derive(Debug, Default)]
pub struct BatchReplies {
    state: Mutex<Batch>,
}

#[derive(Debug, Default)]
struct Batch {
    /// Batches answered so far: a call registered in batch `n` is answered once this exceeds `n`.
    answered: u64,
    waiting: Vec<Waker>,
}

impl BatchReplies {
    /// A shared host.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Batch> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Answers every waiting call; returns how many there were.
    pub fn answer_all(&self) -> usize {
        let wakers = {
            let mut batch = self.lock();
            batch.answered += 1;
            std::mem::take(&mut batch.waiting)
        };
        let count = wakers.len();
        for waker in wakers {
            waker.wake();
        }
        count
    }

    /// One call's reply: pending until the next batch is answered.
    pub fn reply(self: &Arc<Self>) -> Reply {
        Reply {
            host: self.clone(),
            batch: None,
        }
    }
}

/// A call waiting for its batch (see [`BatchReplies::reply`]).
#[derive(Debug)]
pub struct Reply {
    host: Arc<BatchReplies>,
    batch: Option<u64>,
}

impl Future for Reply {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.host.lock();
        match self.batch {
            Some(batch) if state.answered > batch => Poll::Ready(()),
            Some(_) => {
                // Woken early (a cancellation, a spurious poll): stay registered.
                state.waiting.push(cx.waker().clone());
                Poll::Pending
            }
            None => {
                let batch = state.answered;
                state.waiting.push(cx.waker().clone());
                drop(state);
                self.batch = Some(batch);
                Poll::Pending
            }
        }
    }
}

/// A concurrency-safe tool named `name` whose calls wait for `host`'s next batch and answer
/// with an empty text.
pub fn batch_tool(name: &str, host: &Arc<BatchReplies>) -> impl Tool + use<> {
    let host = host.clone();
    FnTool::new(name, move |_, _| {
        let reply = host.reply();
        async move {
            reply.await;
            Ok::<_, ToolError>(ToolOutput::text(String::new()))
        }
    })
    .concurrency_safe(true)
}

/// Drives `future` to its end, answering `host`'s waiting calls whenever it is pending.
/// Call it inside a runtime (for the executor's timers) or with any executor.
pub async fn drive<F: Future>(host: &BatchReplies, future: F) -> F::Output {
    let mut future = pin!(future);
    std::future::poll_fn(|cx| {
        loop {
            if let Poll::Ready(output) = future.as_mut().poll(cx) {
                return Poll::Ready(output);
            }
            if host.answer_all() == 0 {
                return Poll::Pending;
            }
        }
    })
    .await
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use ferroloop::exec::{ToolExecutor, ToolRegistry, ToolUse};

    #[test]
    fn executor_and_floor_finish_under_the_driver() {
        let host = BatchReplies::new();
        let mut tools = ToolRegistry::new();
        tools.register(batch_tool("wait", &host)).unwrap();
        let exec = ToolExecutor::new(tools);
        let uses: Vec<ToolUse> = (0..25)
            .map(|i| ToolUse::new(format!("t{i}"), "wait", serde_json::json!({})))
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let results = runtime.block_on(drive(&host, exec.run(uses))).unwrap();
        assert_eq!(results.len(), 25);
        assert!(results.iter().all(|r| !r.is_error));
        let replies: Vec<Reply> = (0..5).map(|_| host.reply()).collect();
        let done = runtime.block_on(drive(&host, futures::future::join_all(replies)));
        assert_eq!(done.len(), 5);
    }
}
