//! An event stream from the async runtime to JavaScript: a task on napi's tokio runtime
//! produces items (JSON text, serialized off the JS thread) into a bounded channel, and the JS
//! wrapper takes them in batches with `takeJson()`, every item ready at once. When none is
//! ready, the wrapper arms the stream's waker (`setWaker`, an unref'd thread-safe function) and
//! waits: the producer calls it once the next item (or the end) is there.
//!
//! No napi-rs Promise crosses here: a Promise the runtime settles after a worker thread began
//! terminating called a thread-safe function that Node had already freed (and released a
//! reference with an assertion that fails then), which aborted the whole process.
//!
//! `abort()` cancels the producer at once; the stream then ends with an `aborted` error item.
//! Dropping the handle (garbage collection) cancels the producer too.
//!
//! What a stream holds natively (the items not taken yet, the producer's decoder or run) is
//! reported to V8 (`crate::extmem`): the handle stays a few words while a long reply arrives,
//! and a server's streams left unread or half read otherwise waited in V8's old generation for
//! a full GC nothing asked for (`churn.mjs client 65536 8192 64 none`: 586 MB of RSS). The
//! runtime counts it; JavaScript reports the count when it takes items, and when the waker is
//! called with nobody waiting, which the producer does once the count moved a step.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};

use ferroloop::exec::CancellationToken;
use futures_util::FutureExt;
use napi_derive::napi;
use serde_json::json;
use tokio::sync::mpsc;

use napi::bindgen_prelude::ToNapiValue;
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::{Env, JsValue, Status, sys};

use crate::batch::js_string;
use crate::decode::KEPT_SHARE;
use crate::error::{ErrorCode, FerroloopError};
use crate::exec::WakeFn;
use crate::extmem::{ExternalMemory, SharedSize};
use crate::guard;

/// How many produced items may wait for JavaScript before the producer waits (backpressure).
const CHANNEL_ITEMS: usize = 1024;

/// Tells JavaScript that items (or the end) are there, when it is waiting for them.
#[derive(Default)]
struct Doorbell {
    state: std::sync::Mutex<DoorbellState>,
}

#[derive(Default)]
struct DoorbellState {
    /// JavaScript found no item and waits for a ring.
    waiting: bool,
    /// Released when the stream ends or is dropped (the function holds a JS closure).
    wake: Option<WakeFn>,
}

impl Doorbell {
    fn lock(&self) -> std::sync::MutexGuard<'_, DoorbellState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls the waker if JavaScript waits, or if `report` (a report of the memory held is
    /// wanted: the waker, finding nobody waiting, asks for it). Called after each send, under the
    /// same lock as the check in `takeJson`: either that check saw the item, or it set `waiting`
    /// before this. True when the waker was called.
    fn ring(&self, report: bool) -> bool {
        let mut state = self.lock();
        if !std::mem::take(&mut state.waiting) && !report {
            return false;
        }
        let Some(wake) = state.wake.as_ref() else {
            return false;
        };
        let status = wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
        if status != Status::Ok {
            tracing::debug!(?status, "could not wake a JavaScript event stream reader");
        }
        status == Status::Ok
    }

    fn release(&self) {
        let wake = self.lock().wake.take();
        drop(wake);
    }
}

/// What an item waiting in the channel is counted for, per byte of its JSON: its allocation
/// (serde_json starts at 128 bytes and doubles), its slot in the channel's blocks, and the
/// allocator pages it keeps, freed on another thread. Measured: 200 unread 64 KiB client
/// streams (their items waiting, their producers done) grew RSS by 155 KB each, for 44 KB of
/// items' JSON.
const ITEM_COST: usize = 3;

/// What a producer is counted for while it runs, besides its share of the items it sent: its
/// request (an HTTP connection's buffers, which read ahead of the decoder, the decoder's own
/// buffers). Measured: 50 unread 1 MiB client streams, each producer stopped by the full
/// channel, grew RSS by 1.5 MB each, for 90 KB counted from their items. Less than that, as a
/// short reply's request holds less: V8's next full GC (64 MB reported since the last) comes
/// after about 250 requests in flight, not thousands (1,485 sockets open at the end of
/// `churn.mjs client 65536 8192 64 none` before, 375 after).
const PRODUCER_COST: usize = 256 * 1024;

/// What a stream holds natively, counted on the runtime for V8 (see `crate::extmem`).
#[derive(Debug, Default)]
struct Held {
    /// The items not taken yet and the producer's share.
    size: SharedSize,
    /// The producer's share (its request, its decoder's message, an agent run's history):
    /// [`PRODUCER_COST`], a share of the item bytes it sent (as a `StreamDecoder`'s of the bytes
    /// fed) and what it [holds](ItemSink::hold); freed when the producer ends.
    producer: AtomicUsize,
}

impl Held {
    /// Rings `doorbell` (see [`Doorbell::ring`]), asking for a report if the count moved a step.
    fn ring(&self, doorbell: &Doorbell) {
        let report = self.size.ask();
        if !doorbell.ring(report) && report {
            self.size.not_asked();
        }
    }

    fn hold(&self, bytes: usize) {
        self.producer.fetch_add(bytes, Ordering::AcqRel);
        self.size.add(bytes);
    }

    /// The producer has ended (dropped with its state).
    fn producer_ended(&self) {
        self.size.sub(self.producer.swap(0, Ordering::AcqRel));
    }
}

/// The producer's side: sends JSON items; a closed channel means JavaScript is gone.
#[derive(Clone)]
pub struct ItemSink {
    sender: mpsc::Sender<String>,
    doorbell: Arc<Doorbell>,
    held: Arc<Held>,
}

impl ItemSink {
    /// Sends one JSON item; false when nobody listens any more.
    pub async fn send(&self, item: String) -> bool {
        let bytes = item.len();
        self.held.hold(bytes / KEPT_SHARE);
        self.held.size.add(bytes * ITEM_COST);
        let sent = self.sender.send(item).await.is_ok();
        if !sent {
            // Dropped with the send.
            self.held.size.sub(bytes * ITEM_COST);
        }
        self.held.ring(&self.doorbell);
        sent
    }

    /// Counts `bytes` the producer holds until it ends (an agent run's history), besides what
    /// its items are estimated to cost it.
    pub fn hold(&self, bytes: usize) {
        self.held.hold(bytes);
    }

    /// Sends a serializable item.
    pub async fn send_json(&self, item: &impl serde::Serialize) -> bool {
        match serde_json::to_string(item) {
            Ok(text) => self.send(text).await,
            Err(err) => {
                self.send_error(&FerroloopError::internal(format!(
                    "item serialization: {err}"
                )))
                .await
            }
        }
    }

    /// Sends an error item (`{"type": "error", "error": {...}}`).
    pub async fn send_error(&self, error: &FerroloopError) -> bool {
        self.send(error_item(error, serde_json::Map::new())).await
    }

    /// Wakes JavaScript if it waits, without an item: what
    /// [`waitsOnlyOnHost`](NativeEventStream::waits_only_on_host) says has changed.
    pub fn ring(&self) {
        self.held.ring(&self.doorbell);
    }
}

/// Whether the producer of a stream waits on JavaScript alone (see
/// [`NativeEventStream::with_idle_check`]).
pub type IdleCheck = Box<dyn Fn() -> bool + Send + Sync>;

/// An error item: the code, message, status and request id, plus `extra` fields.
pub fn error_item(
    error: &FerroloopError,
    extra: serde_json::Map<String, serde_json::Value>,
) -> String {
    let mut fields = base_error_fields(error);
    fields.extend(extra);
    json!({"type": "error", "error": fields}).to_string()
}

/// The fields every error item has: the code, message, status and request id.
pub fn base_error_fields(error: &FerroloopError) -> serde_json::Map<String, serde_json::Value> {
    let mut fields = serde_json::Map::new();
    fields.insert("code".into(), json!(error.code.as_str()));
    fields.insert("message".into(), json!(error.message));
    fields.insert("status".into(), json!(error.status));
    fields.insert("requestId".into(), json!(error.request_id));
    fields
}

/// Who reacts to `abort()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnAbort {
    /// The producer is dropped at once and the stream ends with an `aborted` error item.
    DropProducer,
    /// The producer watches the token itself and ends the stream its own way (an agent run
    /// reports its `stop` event with a valid history).
    TellProducer,
}

/// Starts `produce(sink, cancel)` on the runtime. A panic in it ends the stream with an
/// `internal` error item. `aborted`: the caller's AbortSignal had already fired, so the stream
/// starts aborted (cancelling after the spawn would race the producer's first poll on another
/// thread, which may already have sent its request).
pub fn start<F, Fut>(
    on_abort: OnAbort,
    aborted: bool,
    produce: F,
) -> napi::Result<NativeEventStream>
where
    F: FnOnce(ItemSink, CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (sender, receiver) = mpsc::channel(CHANNEL_ITEMS);
    let cancel = CancellationToken::new();
    if aborted {
        cancel.cancel();
    }
    let doorbell = Arc::new(Doorbell::default());
    let held = Arc::new(Held::default());
    held.hold(PRODUCER_COST);
    let sink = ItemSink {
        sender,
        doorbell: doorbell.clone(),
        held: held.clone(),
    };
    let producer = produce(sink.clone(), cancel.clone());
    let stopped = cancel.clone();
    let on_panic = sink.clone();
    let task = napi::bindgen_prelude::spawn(async move {
        let outcome = std::panic::AssertUnwindSafe(async move {
            tokio::select! {
                biased;
                () = stopped.cancelled(), if on_abort == OnAbort::DropProducer => {
                    let aborted = FerroloopError::new(ErrorCode::Aborted, "the request was aborted");
                    let _ = sink.send_error(&aborted).await;
                }
                () = producer => {}
            }
        })
        .catch_unwind()
        .await;
        if let Err(payload) = outcome {
            let _ = on_panic
                .send_error(&guard::panic_error(payload.as_ref()))
                .await;
        }
        // The producer went with its state (the future is dropped), which is counted off before
        // the last sender goes: a reader that sees the end (and takes its report back to zero)
        // must find nothing counted, or a report the waker asked for meanwhile (queued before
        // the end) would put the producer's share back, and nothing would take it back before
        // the stream is collected. Then the stream has ended, which a waiting reader must learn.
        let doorbell = on_panic.doorbell.clone();
        let held = on_panic.held.clone();
        held.producer_ended();
        drop(on_panic);
        held.ring(&doorbell);
    });
    Ok(NativeEventStream {
        receiver: std::sync::Mutex::new(receiver),
        doorbell,
        held,
        memory: std::sync::Mutex::new(ExternalMemory::default()),
        cancel,
        task,
        idle_check: None,
    })
}

/// A stream of JSON items produced on the async runtime.
#[napi(js_name = "EventStream", custom_finalize)]
pub struct NativeEventStream {
    receiver: std::sync::Mutex<mpsc::Receiver<String>>,
    doorbell: Arc<Doorbell>,
    /// What the stream holds natively, counted on the runtime.
    held: Arc<Held>,
    /// What was reported of it to V8 (from the JavaScript thread only).
    memory: std::sync::Mutex<ExternalMemory>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// Says whether the producer waits on JavaScript alone; none: it never does.
    idle_check: Option<IdleCheck>,
}

impl napi::bindgen_prelude::ObjectFinalize for NativeEventStream {
    /// Takes back the memory reported to V8 (the stream is being freed).
    fn finalize(self, env: Env) -> napi::Result<()> {
        self.memory().release_in_finalizer(&env);
        Ok(())
    }
}

impl NativeEventStream {
    fn memory(&self) -> std::sync::MutexGuard<'_, ExternalMemory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The stream, with `check` saying when its producer waits on JavaScript alone (an agent
    /// run settling its JavaScript tools' calls). The producer [rings](ItemSink::ring) when
    /// that may have become true.
    pub fn with_idle_check(mut self, check: IdleCheck) -> Self {
        self.idle_check = Some(check);
        self
    }
}

#[napi]
impl NativeEventStream {
    /// Whether the producer now waits on JavaScript alone: nothing native (a request, a timer,
    /// a task) will produce an item or wake JavaScript before JavaScript answers, aborts or
    /// lets go. A reader waiting then need not keep the event loop alive (as for a promise);
    /// the waker is called when this may have become true. Never true for an aborted stream.
    #[napi(js_name = "waitsOnlyOnHost")]
    pub fn waits_only_on_host(&self) -> napi::Result<bool> {
        guard::sync(|| {
            Ok(
                !self.cancel.is_cancelled()
                    && self.idle_check.as_ref().is_some_and(|check| check()),
            )
        })
    }

    /// Sets the function called (asynchronously, from any thread; the function is unref'd and
    /// never keeps the process alive) when `takeJson` returned `undefined` and an item or the
    /// end has arrived since.
    #[napi(js_name = "setWaker", ts_args_type = "wake: () => void")]
    pub fn set_waker(&self, wake: WakeFn) -> napi::Result<()> {
        guard::sync(|| {
            self.doorbell.lock().wake = Some(wake);
            Ok(())
        })
    }

    /// Every item ready now as a JSON array; `undefined` when none is ready yet (the waker will
    /// be called once one is); `null` once the stream has ended (the waker is released).
    ///
    /// Reports to V8 what the stream still holds natively; once it has ended, nothing.
    #[napi(js_name = "takeJson", ts_return_type = "string | null | undefined")]
    pub fn take_json(&self, env: Env) -> napi::Result<Taken> {
        guard::sync(|| {
            let taken = self.take();
            if matches!(taken, Taken::Ended) {
                // The producer and every item are gone.
                self.memory().release_shared(&env, &self.held.size);
            } else {
                self.memory().update_shared(&env, &self.held.size);
            }
            Ok(taken)
        })
    }

    /// Reports to V8 what the stream holds natively now. The waker calls it when it finds
    /// nobody waiting: the runtime wants a report of a stream nobody reads.
    #[napi(js_name = "reportMemory")]
    pub fn report_memory(&self, env: Env) -> napi::Result<()> {
        guard::sync(|| {
            self.memory().update_shared(&env, &self.held.size);
            Ok(())
        })
    }

    /// Cancels the producer (the HTTP request, the agent run): the stream ends with an
    /// `aborted` error item.
    #[napi]
    pub fn abort(&self) -> napi::Result<()> {
        guard::sync(|| {
            self.cancel.cancel();
            Ok(())
        })
    }
}

impl NativeEventStream {
    /// `takeJson` without the report.
    fn take(&self) -> Taken {
        let mut receiver = self.receiver.lock().unwrap_or_else(PoisonError::into_inner);
        let first = {
            let mut state = self.doorbell.lock();
            match receiver.try_recv() {
                Ok(item) => item,
                Err(mpsc::error::TryRecvError::Empty) => {
                    state.waiting = true;
                    return Taken::NotYet;
                }
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    drop(state);
                    self.doorbell.release();
                    return Taken::Ended;
                }
            }
        };
        let mut taken = first.len();
        let mut batch = String::with_capacity(first.len() + 2);
        batch.push('[');
        batch.push_str(&first);
        while let Ok(item) = receiver.try_recv() {
            taken += item.len();
            batch.push(',');
            batch.push_str(&item);
        }
        batch.push(']');
        // JavaScript holds them now (its heap, which V8 sees).
        self.held.size.sub(taken * ITEM_COST);
        Taken::Batch(JsonBatch(batch))
    }
}

/// What `takeJson` found.
pub enum Taken {
    /// Items, as a JSON array.
    Batch(JsonBatch),
    /// None yet (`undefined`).
    NotYet,
    /// The stream has ended (`null`).
    Ended,
}

impl ToNapiValue for Taken {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        match val {
            // SAFETY: `env` is the live environment napi-rs passes to this conversion.
            Taken::Batch(batch) => unsafe { JsonBatch::to_napi_value(env, batch) },
            // SAFETY: as above.
            Taken::NotYet => unsafe { <()>::to_napi_value(env, ()) },
            // SAFETY: as above.
            Taken::Ended => unsafe {
                napi::bindgen_prelude::Null::to_napi_value(env, napi::bindgen_prelude::Null)
            },
        }
    }
}

/// A batch's JSON text on its way to JavaScript, made a string by `batch::js_string` (Latin-1 or the
/// addon's UTF-16 conversion) rather than by napi's `String` conversion, V8's UTF-8 decoder, which
/// is several times slower on non-ASCII text (model output in most languages but English).
pub struct JsonBatch(String);

impl ToNapiValue for JsonBatch {
    unsafe fn to_napi_value(env: sys::napi_env, val: Self) -> napi::Result<sys::napi_value> {
        let env = Env::from_raw(env);
        Ok(js_string(&env, &val.0)?.raw())
    }
}

impl Drop for NativeEventStream {
    fn drop(&mut self) {
        self.doorbell.release();
        self.cancel.cancel();
        // The producer ends on the cancellation; aborting the task as well stops one that is
        // stuck outside a cancellation point.
        self.task.abort();
    }
}
