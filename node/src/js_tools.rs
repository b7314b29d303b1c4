//! Tools implemented in JavaScript, driven from the JS thread.
//!
//! The executor's turns are polled on the JavaScript thread (see `exec.rs`), so calling a JS tool
//! needs no thread hop: a JS tool's future, when first polled, queues an invocation that the JS
//! wrapper starts right after the poll that produced it, and the tool's settled value comes back
//! in a batch of replies (`complete_many`) that wakes the waiting calls. Aborts (timeout,
//! cancellation) are queued the same way and fire the call's `AbortSignal` in JS.
//!
//! The per-call cost matters (a turn can carry ten thousand quick calls), so a waiting call is
//! one entry in a table keyed by its call id, holding its waker: no channel, no task, and no
//! cancellation waiter of its own (the executor's turn watches its cancellation once for all its
//! waiting calls and races a call's timeout itself, then polls the call during the cleanup
//! grace, which is when the call notices its cancelled token and asks JavaScript to abort).
//!
//! The table's entry is the sending half of the core's answer channel for the call
//! ([`ToolContext::answer_channel`]), and the call's future holds the receiving half: a reply is
//! sent through it, which records its order against the call's cancellation (one read of the
//! call's token per reply), and the receiver reports that order to the executor as the future
//! returns the reply. So a tool that answered before the turn was cancelled keeps its answer
//! even when the turn observes the cancellation before it polls the call again, and a tool that
//! answers after it (having seen its `AbortSignal`) is reported cancelled. The channel replaces
//! the waker and the reply the table used to hold (it costs one allocation per call, and saves
//! the one or two clones of the call's token, each a lock, the table needed).
//!
//! A `ToolExecutor` turn uses these queues only for calls that need a future (a tool with a
//! timeout; its other calls are the turn's external calls, see `exec.rs`). Its invocations name
//! only the call id and the call's index in its turn:
//! the JS wrapper still holds the submitted `tool_use` blocks, inputs included, so nothing
//! travels back. An agent's calls come from the model stream in Rust, so their invocations
//! carry the name, id and input.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use ferroloop::agent::HostWait;
use ferroloop::exec::{AnswerReceiver, AnswerSender, ProgressSender, ToolContext};
use ferroloop::json_text::from_str_lossy;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::error::invalid_json;

/// One tool call for JavaScript to start.
#[derive(Debug, Clone)]
pub struct ToolInvocation {
    /// Identifies the call in replies and in aborts.
    pub call_id: u32,
    /// The call's position in its turn (submission order).
    pub index: u32,
    /// The tool's name, the `tool_use` id and the input, for hosts that do not hold the
    /// submitted blocks (the agent's).
    pub detail: Option<InvocationDetail>,
}

/// What an invocation carries when the JS host does not hold the `tool_use` block.
#[derive(Debug, Clone)]
pub struct InvocationDetail {
    /// The tool's name.
    pub name: String,
    /// The `tool_use` block's id.
    pub tool_use_id: String,
    /// The tool input.
    pub input: Value,
    /// The JS run the call belongs to ([`JsRunId`], attached by the agent to each run), so
    /// that JavaScript starts it in the async context captured when that run started.
    pub run_id: Option<u32>,
}

/// The host data an agent attaches to each run (see `ferroloop::exec::HostData`): the id under
/// which JavaScript keeps the async context the run was started in, and where the run says
/// whether it waits on JavaScript alone (told of each reply and progress report delivered).
#[derive(Debug, Clone)]
pub struct JsRunId {
    /// The run's id in JavaScript.
    pub id: u32,
    /// The run's [`HostWait`].
    pub host_wait: HostWait,
}

impl serde::Serialize for ToolInvocation {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut out = serializer.serialize_struct("ToolInvocation", 6)?;
        out.serialize_field("callId", &self.call_id)?;
        out.serialize_field("index", &self.index)?;
        if let Some(detail) = &self.detail {
            out.serialize_field("name", &detail.name)?;
            out.serialize_field("toolUseId", &detail.tool_use_id)?;
            out.serialize_field("input", &detail.input)?;
            if let Some(run_id) = detail.run_id {
                out.serialize_field("runId", &run_id)?;
            }
        }
        out.end()
    }
}

/// What a JavaScript tool produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolReply {
    /// The result content: text or content blocks.
    pub content: ReplyContent,
    /// The tool failed (threw, rejected or reported an error).
    pub is_error: bool,
}

/// A reply's content.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyContent {
    /// Plain text.
    Text(String),
    /// Content blocks (a JSON array as the tool returned it).
    Blocks(Vec<Value>),
}

impl ToolReply {
    /// An error reply with a plain-text message.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: ReplyContent::Text(message.into()),
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
    /// The JS run the call belongs to ([`JsRunId`]): JavaScript gives the call the reason that
    /// run was aborted for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
}

/// Tells the JS host that the outbox has work (for calls started off the JS thread).
pub type Notify = Arc<dyn Fn() + Send + Sync>;

/// Asks the JS host whether a call of tool `name` with this input is concurrency-safe (for
/// calls submitted off the JS thread, where no decision was taken at submission time).
pub type Decide = Arc<dyn Fn(&str, &Value) -> bool + Send + Sync>;

/// Work for the JS host, drained after every poll.
#[derive(Debug, Default)]
pub struct Outbox {
    /// Calls to start, with their details (for hosts that do not hold the `tool_use` blocks).
    pub invocations: Vec<ToolInvocation>,
    /// Calls to start, as flat `callId, index` pairs (for hosts that hold the blocks: a
    /// `ToolExecutor`'s turns). Two words per call, in a buffer kept across polls (see
    /// [`JsToolQueues::take_starts`]): ten thousand fresh 128-byte invocations cost more in page
    /// faults and cache misses than everything else the first poll of a call does.
    pub starts: Vec<u32>,
    /// Calls to abort.
    pub aborts: Vec<ToolAbort>,
}

impl Outbox {
    fn is_empty(&self) -> bool {
        self.invocations.is_empty() && self.starts.is_empty() && self.aborts.is_empty()
    }
}

/// A hasher for the (sequential, unique) call ids: a multiplicative mix is all they need.
#[derive(Default)]
struct CallIdHasher(u64);

impl Hasher for CallIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(byte)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, value: u32) {
        self.0 = u64::from(value).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A call waiting for its reply (removed when the reply arrives).
struct Slot {
    /// Where the reply goes: the call's answer channel, which records the reply's order against
    /// the call's cancellation as it is sent.
    reply: AnswerSender<ToolReply>,
    progress: ProgressSender,
    /// The agent run the call belongs to, told when its reply or a progress report came.
    host_wait: Option<HostWait>,
}

/// Everything behind the queues' one lock.
#[derive(Default)]
struct State {
    outbox: Outbox,
    calls: HashMap<u32, Slot, BuildHasherDefault<CallIdHasher>>,
}

/// The JS run a call belongs to: the [`JsRunId`] its run carries as host data, if any.
fn run_id(ctx: &ToolContext) -> Option<u32> {
    js_run(ctx).map(|run| run.id)
}

fn js_run(ctx: &ToolContext) -> Option<&JsRunId> {
    ctx.host_data()
        .and_then(|host| host.downcast_ref::<JsRunId>())
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
    state: Mutex<State>,
    notify: Option<Notify>,
    /// Decides per-input concurrency safety by asking JavaScript (the agent's host); without it
    /// (a `ToolExecutor`, whose turns receive JavaScript's decisions with the submissions) a
    /// question that reaches the tool is answered "not safe".
    decide: Option<Decide>,
    /// Invocations carry name, id and input (the host does not hold the `tool_use` blocks).
    detailed: bool,
}

impl fmt::Debug for JsToolQueues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsToolQueues")
            .field("waiting", &self.lock().calls.len())
            .field("notify", &self.notify.is_some())
            .finish_non_exhaustive()
    }
}

/// Reply flags (`complete_many`): the tool failed.
const FLAG_ERROR: u32 = 1;
/// Reply flags: the content is an array of content blocks.
const FLAG_BLOCKS: u32 = 2;
/// Reply flags: not a reply but a progress report (the content is its data).
const FLAG_PROGRESS: u32 = 4;

/// One item of a reply batch: `callId, flags, content` (three elements of a flat array).
struct Incoming {
    call_id: u32,
    flags: u32,
    content: Value,
}

/// A reply batch: a flat JSON array `[callId, flags, content, callId, flags, content, ...]`
/// (no object per reply: its keys would be parsed and matched ten thousand times).
struct ReplyBatch(Vec<Incoming>);

/// The fewest bytes one reply takes in a batch (`1,0,"",`): the text's length over it bounds the
/// number of replies, so the batch is allocated once.
const MIN_REPLY_BYTES: usize = 7;
/// At most this many replies are reserved up front (a batch with one huge reply must not
/// reserve for millions).
const MAX_RESERVED_REPLIES: usize = 16_384;

impl ReplyBatch {
    /// Parses a batch, reserving for as many replies as its text can hold. A content the reader
    /// refuses does not lose the batch (every other reply in it): the batch is then read item
    /// by item (see [`Incoming::lenient`]). Only a batch that is not a flat array of triples is
    /// an error.
    fn parse(text: &str) -> Result<Self, serde_json::Error> {
        Self::parse_with(text, false).or_else(|err| Self::parse_with(text, true).map_err(|_| err))
    }

    /// Parses a batch, its contents as values (`lenient`: as JSON texts first, each read on its
    /// own; twice the reading, so only when the other way failed).
    fn parse_with(text: &str, lenient: bool) -> Result<Self, serde_json::Error> {
        let capacity = (text.len() / MIN_REPLY_BYTES).min(MAX_RESERVED_REPLIES);
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let batch = deserializer.deserialize_seq(BatchVisitor { capacity, lenient })?;
        deserializer.end()?;
        Ok(batch)
    }
}

impl Incoming {
    /// The item of a content given as JSON `text` that the batch's reading refused. Refused
    /// again once lone surrogates read as U+FFFD (see [`read_json`]), it can only be nested
    /// past the depth limit: a reply is then an error reply saying so, a progress datum its
    /// JSON text (see [`progress_datum`]).
    fn lenient(call_id: u32, flags: u32, text: &str) -> Self {
        if flags & FLAG_PROGRESS != 0 {
            return Self {
                call_id,
                flags,
                content: progress_datum(text),
            };
        }
        match read_json(text) {
            Ok(content) => Self {
                call_id,
                flags,
                content,
            },
            Err(err) => Self {
                call_id,
                flags: FLAG_ERROR,
                content: Value::String(unreadable_result(&err)),
            },
        }
    }
}

/// The value of JSON `text` JavaScript wrote: a lone surrogate's escape reads as U+FFFD, as napi
/// reads the string itself (the core's [`from_str_lossy`]). Text without one is read once.
pub(crate) fn read_json(text: &str) -> Result<Value, serde_json::Error> {
    from_str_lossy(text)
}

/// A progress datum from its JSON text (see [`read_json`]). One the reader still refuses (it
/// can only be nested deeper than the depth limit) is delivered as its JSON text, a string: it
/// used to become `null`, unseen.
pub(crate) fn progress_datum(text: &str) -> Value {
    read_json(text).unwrap_or_else(|err| {
        tracing::warn!(%err, "a tool's progress datum is sent as its JSON text: it cannot be read");
        Value::String(text.to_owned())
    })
}

/// The error message of a tool result the reader refused (`err`): it is nested too deep.
pub(crate) fn unreadable_result(err: &serde_json::Error) -> String {
    invalid_json("the tool's result", err).message
}

struct BatchVisitor {
    capacity: usize,
    /// Contents are read as JSON texts first, each one on its own (see [`Incoming::lenient`]).
    lenient: bool,
}

impl<'de> Visitor<'de> for BatchVisitor {
    type Value = ReplyBatch;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a flat array of callId, flags, content triples")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ReplyBatch, A::Error> {
        let mut out = Vec::with_capacity(self.capacity);
        while let Some(call_id) = seq.next_element::<u32>()? {
            let flags = seq
                .next_element::<u32>()?
                .ok_or_else(|| de::Error::custom("a reply without flags"))?;
            if self.lenient {
                let content = seq
                    .next_element::<&RawValue>()?
                    .ok_or_else(|| de::Error::custom("a reply without content"))?;
                out.push(Incoming::lenient(call_id, flags, content.get()));
                continue;
            }
            let content = seq
                .next_element::<Value>()?
                .ok_or_else(|| de::Error::custom("a reply without content"))?;
            out.push(Incoming {
                call_id,
                flags,
                content,
            });
        }
        Ok(ReplyBatch(out))
    }
}

impl<'de> serde::Deserialize<'de> for ReplyBatch {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(BatchVisitor {
            capacity: 0,
            lenient: false,
        })
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep serving it.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl JsToolQueues {
    /// Queues whose new work is announced through `notify`, with invocations that carry the
    /// tool name, `tool_use` id and input (the agent's host).
    /// `decide` answers the per-input concurrency questions of tools whose safety JavaScript
    /// decides (see [`JsToolQueues::decision`]).
    pub fn with_notify(notify: Notify, decide: Option<Decide>) -> Self {
        Self {
            notify: Some(notify),
            decide,
            detailed: true,
            ..Self::default()
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Adds to the outbox, announcing the work when the outbox was empty (the host drains it
    /// all at once, so one announcement per batch is enough).
    fn post(&self, state: &mut State, add: impl FnOnce(&mut Outbox)) -> bool {
        let was_empty = state.outbox.is_empty();
        add(&mut state.outbox);
        was_empty && self.notify.is_some()
    }

    fn announce(&self) {
        if let Some(notify) = &self.notify {
            notify();
        }
    }

    /// Takes the queued invocations and aborts.
    pub fn drain(&self) -> Outbox {
        std::mem::take(&mut self.lock().outbox)
    }

    /// Takes the queued `callId, index` start pairs into `starts` (cleared first; the two
    /// buffers swap, so both keep their capacity) and the queued aborts.
    pub fn take_starts(&self, starts: &mut Vec<u32>) -> Vec<ToolAbort> {
        starts.clear();
        let mut state = self.lock();
        std::mem::swap(starts, &mut state.outbox.starts);
        std::mem::take(&mut state.outbox.aborts)
    }

    /// Delivers a batch of replies and progress reports, in order (see `ReplyBatch`: flags
    /// 1 = error, 2 = content blocks, 4 = progress report). Returns how many replies reached a
    /// call still waiting.
    pub fn complete_many(&self, replies_json: &str) -> Result<u32, serde_json::Error> {
        let ReplyBatch(replies) = ReplyBatch::parse(replies_json)?;
        let mut sends = Vec::with_capacity(replies.len());
        {
            let mut state = self.lock();
            for incoming in replies {
                if incoming.flags & FLAG_PROGRESS != 0 {
                    if let Some(slot) = state.calls.get(&incoming.call_id) {
                        slot.progress.send(incoming.content);
                        if let Some(wait) = &slot.host_wait {
                            wait.host_acted();
                        }
                    }
                    continue;
                }
                let (content, malformed) = reply_content(incoming.content, incoming.flags);
                let reply = ToolReply {
                    content,
                    is_error: malformed || incoming.flags & FLAG_ERROR != 0,
                };
                if let Some(slot) = state.calls.remove(&incoming.call_id) {
                    sends.push((slot.reply, reply, slot.host_wait));
                }
            }
        }
        let delivered = u32::try_from(sends.len()).unwrap_or(u32::MAX);
        // Sent outside the lock: a send wakes its call, which may poll (and so lock) at once.
        for (sender, reply, host_wait) in sends {
            // The call's future is gone (dropped after a timeout or cancellation): dropped.
            let _ = sender.send(reply);
            if let Some(wait) = host_wait {
                wait.host_acted();
            }
        }
        Ok(delivered)
    }

    /// Whether invocations or aborts wait for JavaScript to drain them (a wake is on its way).
    pub fn has_work_for_js(&self) -> bool {
        !self.lock().outbox.is_empty()
    }

    /// Delivers the reply of call `call_id`. Returns false when nobody waits for it any more
    /// (the call was dropped after a timeout or cancellation, or was answered already).
    pub fn complete(&self, call_id: u32, reply: ToolReply) -> bool {
        let slot = self.lock().calls.remove(&call_id);
        match slot {
            Some(slot) => {
                let _ = slot.reply.send(reply);
                if let Some(wait) = slot.host_wait {
                    wait.host_acted();
                }
                true
            }
            None => false,
        }
    }

    /// The concurrency safety of this call of `tool`, asked of JavaScript when the queues have
    /// a [`Decide`] function (an agent's loop asks once per call and hands the answer to its
    /// turn); false, the conservative answer, without one (a `ToolExecutor`'s turns receive
    /// JavaScript's decisions with the submissions and do not ask).
    pub fn decision(&self, tool: &str, input: &Value) -> bool {
        match &self.decide {
            // Asked without the lock: JavaScript may drain or reply meanwhile.
            Some(decide) => decide(tool, input),
            None => false,
        }
    }

    /// A future that calls tool `name` in JavaScript and resolves with its reply. When the
    /// call's token is cancelled, the next poll asks JavaScript to abort it (reason `timeout`
    /// when the call's own timeout cancelled it, as the executor recorded, else `aborted`) and
    /// keeps waiting for the reply: the executor bounds that wait with its cleanup grace, then
    /// drops the future.
    pub fn call(self: &Arc<Self>, name: &str, input: Value, ctx: ToolContext) -> JsCall {
        let detail = self.detailed.then(|| InvocationDetail {
            name: name.to_owned(),
            tool_use_id: ctx.tool_use_id().to_owned(),
            input,
            run_id: run_id(&ctx),
        });
        JsCall {
            queues: self.clone(),
            call_id: None,
            reply: None,
            detail,
            ctx,
            aborted: false,
        }
    }
}

/// The content of a reply: text, or (flag 2) content blocks given as an array or as the JSON
/// text of one. Blocks that are not an array become an error reply.
fn reply_content(content: Value, flags: u32) -> (ReplyContent, bool) {
    if flags & FLAG_BLOCKS == 0 {
        return match content {
            Value::String(text) => (ReplyContent::Text(text), false),
            // The JS host sends a string; anything else is kept as its JSON text.
            other => (ReplyContent::Text(other.to_string()), false),
        };
    }
    let parsed = match content {
        Value::String(text) => read_json(&text),
        other => Ok(other),
    };
    match parsed {
        Ok(Value::Array(blocks)) => (ReplyContent::Blocks(blocks), false),
        Ok(_) => (
            ReplyContent::Text("the tool returned content blocks that are not a JSON array".into()),
            true,
        ),
        Err(err) => (ReplyContent::Text(unreadable_result(&err)), true),
    }
}

/// A JS tool call in flight (see [`JsToolQueues::call`]). Dropping it before the reply aborts
/// the JS side and forgets the call.
pub struct JsCall {
    queues: Arc<JsToolQueues>,
    /// Set when the invocation was queued (the first poll).
    call_id: Option<u32>,
    /// The receiving half of the call's answer channel (its sender waits in the queues'
    /// table), from the first poll until the reply was returned.
    reply: Option<AnswerReceiver<ToolReply>>,
    detail: Option<InvocationDetail>,
    ctx: ToolContext,
    aborted: bool,
}

impl JsCall {
    fn abort_reason(&self) -> &'static str {
        // The executor's record, not the clock: the deadline was fixed before this future was
        // made, so "elapsed since then >= limit" named a timeout `aborted` whenever the timer
        // fired less late than that gap (a busy machine).
        if self.ctx.timed_out() {
            "timeout"
        } else {
            "aborted"
        }
    }
}

impl Future for JsCall {
    type Output = ToolReply;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ToolReply> {
        let this = self.get_mut();
        let Some(call_id) = this.call_id else {
            this.start(cx);
            return Poll::Pending;
        };
        let Some(receiver) = this.reply.as_mut() else {
            return Poll::Ready(ToolReply::error("internal: polled after its reply"));
        };
        match Pin::new(receiver).poll(cx) {
            // The receiver reported the reply's order against the call's cancellation: it
            // decides the outcome, not the moment of this poll.
            Poll::Ready(Ok(reply)) => {
                this.reply = None;
                Poll::Ready(reply)
            }
            Poll::Ready(Err(_)) => {
                this.reply = None;
                Poll::Ready(ToolReply::error("internal: the call was forgotten"))
            }
            Poll::Pending => {
                if !this.aborted && this.ctx.is_cancelled() {
                    this.aborted = true;
                    let reason = this.abort_reason();
                    let run = run_id(&this.ctx);
                    let queues = &this.queues;
                    let announce = queues.post(&mut queues.lock(), |outbox| {
                        outbox.aborts.push(ToolAbort {
                            call_id,
                            reason,
                            run,
                        });
                    });
                    if announce {
                        queues.announce();
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl JsCall {
    /// The first poll: queues the invocation, with the call's answer channel waiting in the
    /// table. Reads no cancellation (the executor does before it starts the call).
    fn start(&mut self, cx: &mut Context<'_>) {
        let (sender, mut receiver) = self.ctx.answer_channel();
        // Registers the waker; nothing can have been sent yet.
        let _ = Pin::new(&mut receiver).poll(cx);
        self.reply = Some(receiver);
        let queues = &self.queues;
        let call_id = queues.next_call_id.fetch_add(1, Ordering::Relaxed);
        self.call_id = Some(call_id);
        let index = u32::try_from(self.ctx.index()).unwrap_or(u32::MAX);
        let detail = self.detail.take();
        let mut state = queues.lock();
        state.calls.insert(
            call_id,
            Slot {
                reply: sender,
                progress: self.ctx.progress_sender(),
                host_wait: js_run(&self.ctx).map(|run| run.host_wait.clone()),
            },
        );
        let announce = queues.post(&mut state, |outbox| match detail {
            None => outbox.starts.extend_from_slice(&[call_id, index]),
            Some(detail) => outbox.invocations.push(ToolInvocation {
                call_id,
                index,
                detail: Some(detail),
            }),
        });
        drop(state);
        if announce {
            queues.announce();
        }
    }
}

impl Drop for JsCall {
    fn drop(&mut self) {
        let Some(call_id) = self.call_id else { return };
        let mut state = self.queues.lock();
        let unanswered = state.calls.remove(&call_id).is_some();
        let announce = unanswered && !self.aborted && {
            let run = run_id(&self.ctx);
            self.queues.post(&mut state, |outbox| {
                outbox.aborts.push(ToolAbort {
                    call_id,
                    reason: "aborted",
                    run,
                });
            })
        };
        drop(state);
        if announce {
            self.queues.announce();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn reply_batches_parse_as_flat_triples() {
        let ReplyBatch(items) = serde_json::from_str(
            r#"[1, 0, "ok", 2, 3, [{"type": "text", "text": "x"}], 3, 4, {"p": 1}]"#,
        )
        .unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0].call_id, 1);
        assert_eq!(
            reply_content(items[0].content.clone(), items[0].flags),
            (ReplyContent::Text("ok".into()), false)
        );
        assert!(matches!(
            reply_content(items[1].content.clone(), items[1].flags),
            (ReplyContent::Blocks(ref blocks), false) if blocks.len() == 1
        ));
        assert!(matches!(
            reply_content(Value::String(r#"[{"type": "text", "text": "y"}]"#.into()), FLAG_BLOCKS),
            (ReplyContent::Blocks(ref blocks), false) if blocks.len() == 1
        ));
        assert!(matches!(
            reply_content(Value::String("{}".into()), FLAG_BLOCKS),
            (ReplyContent::Text(_), true)
        ));
        assert_eq!(items[2].flags, FLAG_PROGRESS);
        assert!(serde_json::from_str::<ReplyBatch>("[1, 0]").is_err());
        assert!(serde_json::from_str::<ReplyBatch>("not json").is_err());
        let ReplyBatch(parsed) = ReplyBatch::parse(r#"[7, 1, "x", 8, 0, "y"]"#).unwrap();
        assert_eq!((parsed.len(), parsed[1].call_id), (2, 8));
        assert!(ReplyBatch::parse("[1, 0, \"x\"] trailing").is_err());
        assert!(ReplyBatch::parse("[1, 0]").is_err());
    }

    #[test]
    fn an_invocation_names_its_run_when_it_has_one() {
        let invocation = |run_id| ToolInvocation {
            call_id: 7,
            index: 1,
            detail: Some(InvocationDetail {
                name: "t".into(),
                tool_use_id: "toolu_1".into(),
                input: serde_json::json!({"a": 1}),
                run_id,
            }),
        };
        let with_run = serde_json::to_value(invocation(Some(3))).unwrap();
        assert_eq!(with_run["runId"], 3);
        assert_eq!(with_run["toolUseId"], "toolu_1");
        let without = serde_json::to_value(invocation(None)).unwrap();
        assert!(without.get("runId").is_none());
    }

    #[test]
    fn without_a_decide_function_every_call_is_exclusive() {
        let queues = JsToolQueues::default();
        let input = serde_json::json!({"path": "a"});
        assert!(!queues.decision("t", &input));
        assert!(!queues.decision("other", &input));
    }

    #[test]
    fn a_decide_function_is_asked_for_every_question() {
        let asked = Arc::new(AtomicU32::new(0));
        let counter = asked.clone();
        let decide: Decide = Arc::new(move |_tool: &str, input: &Value| {
            counter.fetch_add(1, Ordering::Relaxed);
            input["read"] == Value::Bool(true)
        });
        let queues = JsToolQueues::with_notify(Arc::new(|| {}), Some(decide));
        let read = serde_json::json!({"read": true});
        let write = serde_json::json!({"read": false});
        // No answer is kept: the core asks once per call (the agent's loop decides and hands
        // the answer to its turn), so a kept one could only answer a different call.
        assert!(queues.decision("fs", &read));
        assert!(!queues.decision("fs", &write));
        assert!(queues.decision("fs", &read));
        assert_eq!(asked.load(Ordering::Relaxed), 3);
    }
}
