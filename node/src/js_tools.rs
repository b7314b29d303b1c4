//! Tools implemented in JavaScript, driven from the JS thread.
//!
//! The executor's turns are polled on the JavaScript thread (see `exec.rs`), so calling a JS tool
//! needs no thread hop: `JsTool::call` queues an invocation that the JS wrapper starts right
//! after the poll that produced it, and the tool's settled value comes back through a
//! synchronous `complete(callId, reply)` that wakes the waiting call. Aborts (timeout,
//! cancellation) are queued the same way and fire the call's `AbortSignal` in JS.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ferroloop::exec::{CancellationToken, ProgressSender};
use napi_derive::napi;
use tokio::sync::oneshot;

/// One tool call for JavaScript to start (sent inside a poll's JSON, so the input arrives in
/// JS already parsed, in the same `JSON.parse`).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInvocation {
    /// Identifies the call in `complete` and in aborts.
    pub call_id: u32,
    /// The tool's name.
    pub name: String,
    /// The `tool_use` block's id.
    pub tool_use_id: String,
    /// The tool input.
    pub input: serde_json::Value,
}

/// What a JavaScript tool produced.
#[napi(object)]
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolReply {
    /// The result content: text, or (when `contentIsJson`) a JSON array of content blocks.
    pub content: String,
    /// Whether `content` is JSON (an array of content blocks) rather than plain text.
    pub content_is_json: bool,
    /// The tool failed (threw, rejected or reported an error).
    pub is_error: bool,
}

impl ToolReply {
    /// An error reply with a plain-text message.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: message.into(),
            content_is_json: false,
            is_error: true,
        }
    }
}

/// Asks JavaScript to abort one running call.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAbort {
    /// The call to abort.
    pub call_id: u32,
    /// `timeout` or `aborted`.
    pub reason: &'static str,
}

/// Tells the JS host that the outbox has work (for calls started off the JS thread).
pub type Notify = Arc<dyn Fn() + Send + Sync>;

/// A call waiting for its reply, and where its progress reports go.
struct Waiting {
    reply: oneshot::Sender<ToolReply>,
    progress: Option<ProgressSender>,
}

/// The queues between the executor's calls and the JS host, shared by every turn of one
/// executor.
///
/// A `ToolExecutor`'s turns are polled on the JS thread, which drains the outbox after every
/// poll. An agent's turns run on the async runtime instead: its queues carry a [`Notify`] that
/// asks JavaScript to drain whenever the outbox turns non-empty.
#[derive(Default)]
pub struct JsToolQueues {
    next_call_id: AtomicU32,
    outbox: Mutex<Outbox>,
    waiting: Mutex<HashMap<u32, Waiting>>,
    notify: Option<Notify>,
}

impl std::fmt::Debug for JsToolQueues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsToolQueues")
            .field("waiting", &lock(&self.waiting).len())
            .field("notify", &self.notify.is_some())
            .finish_non_exhaustive()
    }
}

/// Work for the JS host, drained after every poll.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Calls to start.
    pub invocations: Vec<ToolInvocation>,
    /// Calls to abort.
    pub aborts: Vec<ToolAbort>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep serving it.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl JsToolQueues {
    /// Queues whose new work is announced through `notify`.
    pub fn with_notify(notify: Notify) -> Self {
        Self {
            notify: Some(notify),
            ..Self::default()
        }
    }

    /// Adds to the outbox, announcing the work when the outbox was empty (the host drains it
    /// all at once, so one announcement per batch is enough).
    fn post(&self, add: impl FnOnce(&mut Outbox)) {
        let was_empty = {
            let mut outbox = lock(&self.outbox);
            let was_empty = outbox.invocations.is_empty() && outbox.aborts.is_empty();
            add(&mut outbox);
            was_empty
        };
        if was_empty && let Some(notify) = &self.notify {
            notify();
        }
    }

    /// Takes the queued invocations and aborts.
    pub fn drain(&self) -> Outbox {
        std::mem::take(&mut *lock(&self.outbox))
    }

    /// Delivers a batch of replies and progress reports, in order (JSON array of
    /// `{callId, content, contentIsJson, isError}` or `{callId, progress: true, data}`); returns how many
    /// replies reached a call still waiting.
    pub fn complete_many(&self, replies_json: &str) -> Result<u32, serde_json::Error> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Incoming {
            call_id: u32,
            #[serde(default)]
            progress: bool,
            #[serde(default)]
            data: serde_json::Value,
            #[serde(default)]
            content: String,
            #[serde(default)]
            content_is_json: bool,
            #[serde(default)]
            is_error: bool,
        }
        let replies: Vec<Incoming> = serde_json::from_str(replies_json)?;
        let mut delivered = 0;
        for incoming in replies {
            if incoming.progress {
                self.progress(incoming.call_id, incoming.data);
                continue;
            }
            let reply = ToolReply {
                content: incoming.content,
                content_is_json: incoming.content_is_json,
                is_error: incoming.is_error,
            };
            delivered += u32::from(self.complete(incoming.call_id, reply));
        }
        Ok(delivered)
    }

    /// Forwards a progress report of a running call to its turn (dropped once it ended).
    pub fn progress(&self, call_id: u32, data: serde_json::Value) {
        let sender = lock(&self.waiting)
            .get(&call_id)
            .and_then(|waiting| waiting.progress.clone());
        if let Some(sender) = sender {
            sender.send(data);
        }
    }

    /// Delivers the reply of call `call_id`. Returns false when nobody waits for it any more
    /// (the call was dropped after a timeout or cancellation).
    pub fn complete(&self, call_id: u32, reply: ToolReply) -> bool {
        match lock(&self.waiting).remove(&call_id) {
            Some(waiting) => waiting.reply.send(reply).is_ok(),
            None => false,
        }
    }

    fn start(
        &self,
        name: &str,
        tool_use_id: &str,
        input: serde_json::Value,
        progress: Option<ProgressSender>,
    ) -> PendingCall<'_> {
        let call_id = self.next_call_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        lock(&self.waiting).insert(
            call_id,
            Waiting {
                reply: sender,
                progress,
            },
        );
        self.post(|outbox| {
            outbox.invocations.push(ToolInvocation {
                call_id,
                name: name.to_owned(),
                tool_use_id: tool_use_id.to_owned(),
                input,
            });
        });
        PendingCall {
            queues: self,
            call_id,
            receiver: Some(receiver),
            aborted: false,
        }
    }

    fn abort(&self, call_id: u32, reason: &'static str) {
        self.post(|outbox| outbox.aborts.push(ToolAbort { call_id, reason }));
    }

    /// Calls tool `name` in JavaScript and waits for its reply. When `cancel` fires first, the
    /// JS call is aborted (reason from `reason()`) and its reply is still awaited: the executor
    /// bounds that wait with its cleanup grace, then drops this future.
    pub async fn call(
        self: &Arc<Self>,
        name: &str,
        tool_use_id: &str,
        input: serde_json::Value,
        cancel: CancellationToken,
        progress: Option<ProgressSender>,
        reason: impl Fn() -> &'static str,
    ) -> ToolReply {
        let mut pending = self.start(name, tool_use_id, input, progress);
        let Some(mut receiver) = pending.receiver.take() else {
            return ToolReply::error("internal: call started twice");
        };
        let reply = tokio::select! {
            biased;
            reply = &mut receiver => reply,
            () = cancel.cancelled() => {
                pending.aborted = true;
                self.abort(pending.call_id, reason());
                (&mut receiver).await
            }
        };
        pending.receiver = None;
        lock(&self.waiting).remove(&pending.call_id);
        reply.unwrap_or_else(|_| ToolReply::error(format!("tool {name} was dropped")))
    }
}

/// A started call; dropping it before the reply aborts the JS side and forgets the waiter.
struct PendingCall<'a> {
    queues: &'a JsToolQueues,
    call_id: u32,
    receiver: Option<oneshot::Receiver<ToolReply>>,
    aborted: bool,
}

impl Drop for PendingCall<'_> {
    fn drop(&mut self) {
        let answered = lock(&self.queues.waiting).remove(&self.call_id).is_none();
        if !answered && !self.aborted {
            self.queues.abort(self.call_id, "aborted");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reply_reaches_the_waiting_call() {
        let queues = Arc::new(JsToolQueues::default());
        let token = CancellationToken::new();
        let q = queues.clone();
        let call = tokio::spawn(async move {
            q.call(
                "echo",
                "t1",
                serde_json::json!({}),
                token,
                None,
                || "aborted",
            )
            .await
        });
        let invocation = loop {
            if let Some(inv) = queues.drain().invocations.pop() {
                break inv;
            }
            tokio::task::yield_now().await;
        };
        assert_eq!(invocation.name, "echo");
        let reply = ToolReply {
            content: "hi".into(),
            content_is_json: false,
            is_error: false,
        };
        assert!(queues.complete(invocation.call_id, reply.clone()));
        assert_eq!(call.await.unwrap(), reply);
        assert!(!queues.complete(invocation.call_id, reply), "answered once");
    }

    #[tokio::test]
    async fn replies_arrive_in_batches() {
        let queues = Arc::new(JsToolQueues::default());
        let mut calls = Vec::new();
        for i in 0..3 {
            let q = queues.clone();
            calls.push(tokio::spawn(async move {
                q.call(
                    "t",
                    &format!("t{i}"),
                    serde_json::json!({ "i": i }),
                    CancellationToken::new(),
                    None,
                    || "aborted",
                )
                .await
            }));
        }
        let mut ids = Vec::new();
        while ids.len() < 3 {
            ids.extend(
                queues
                    .drain()
                    .invocations
                    .into_iter()
                    .map(|inv| inv.call_id),
            );
            tokio::task::yield_now().await;
        }
        let batch = serde_json::to_string(&ids.iter().map(|id| serde_json::json!({
            "callId": id, "content": format!("r{id}"), "contentIsJson": false, "isError": false
        })).collect::<Vec<_>>()).unwrap();
        assert_eq!(queues.complete_many(&batch).unwrap(), 3);
        for call in calls {
            assert!(call.await.unwrap().content.starts_with('r'));
        }
        assert!(queues.complete_many("not json").is_err());
    }

    #[tokio::test]
    async fn cancellation_queues_an_abort_and_still_waits_for_the_reply() {
        let queues = Arc::new(JsToolQueues::default());
        let token = CancellationToken::new();
        let q = queues.clone();
        let t = token.clone();
        let call = tokio::spawn(async move {
            q.call("slow", "t1", serde_json::json!({}), t, None, || "timeout")
                .await
        });
        let id = loop {
            if let Some(inv) = queues.drain().invocations.pop() {
                break inv.call_id;
            }
            tokio::task::yield_now().await;
        };
        token.cancel();
        let abort = loop {
            if let Some(abort) = queues.drain().aborts.pop() {
                break abort;
            }
            tokio::task::yield_now().await;
        };
        assert_eq!((abort.call_id, abort.reason), (id, "timeout"));
        assert!(queues.complete(id, ToolReply::error("stopped")));
        assert_eq!(call.await.unwrap().content, "stopped");
    }

    #[tokio::test]
    async fn dropping_an_unanswered_call_aborts_it() {
        let queues = Arc::new(JsToolQueues::default());
        let q = queues.clone();
        let call = tokio::spawn(async move {
            q.call(
                "never",
                "t1",
                "{}".into(),
                CancellationToken::new(),
                None,
                || "aborted",
            )
            .await
        });
        let id = loop {
            if let Some(inv) = queues.drain().invocations.pop() {
                break inv.call_id;
            }
            tokio::task::yield_now().await;
        };
        call.abort();
        let _ = call.await;
        let aborts = queues.drain().aborts;
        assert_eq!(aborts.len(), 1);
        assert_eq!(aborts[0].call_id, id);
        assert!(
            !queues.complete(id, ToolReply::error("late")),
            "the waiter is gone"
        );
    }
}
