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

use std::future::Future;
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
use crate::error::{ErrorCode, FerroloopError};
use crate::exec::WakeFn;
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

    /// Calls the waker if JavaScript waits. Called after each send, under the same lock as the
    /// check in `takeJson`: either that check saw the item, or it set `waiting` before this.
    fn ring(&self) {
        let mut state = self.lock();
        if !std::mem::take(&mut state.waiting) {
            return;
        }
        if let Some(wake) = state.wake.as_ref() {
            let status = wake.call((), ThreadsafeFunctionCallMode::NonBlocking);
            if status != Status::Ok {
                tracing::debug!(?status, "could not wake a JavaScript event stream reader");
            }
        }
    }

    fn release(&self) {
        let wake = self.lock().wake.take();
        drop(wake);
    }
}

/// The producer's side: sends JSON items; a closed channel means JavaScript is gone.
#[derive(Clone)]
pub struct ItemSink {
    sender: mpsc::Sender<String>,
    doorbell: Arc<Doorbell>,
}

impl ItemSink {
    /// Sends one JSON item; false when nobody listens any more.
    pub async fn send(&self, item: String) -> bool {
        let sent = self.sender.send(item).await.is_ok();
        self.doorbell.ring();
        sent
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
        self.doorbell.ring();
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
    let sink = ItemSink {
        sender,
        doorbell: doorbell.clone(),
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
        // The last sender goes: the stream has ended, which a waiting reader must learn.
        let doorbell = on_panic.doorbell.clone();
        drop(on_panic);
        doorbell.ring();
    });
    Ok(NativeEventStream {
        receiver: std::sync::Mutex::new(receiver),
        doorbell,
        cancel,
        task,
        idle_check: None,
    })
}

/// A stream of JSON items produced on the async runtime.
#[napi(js_name = "EventStream")]
pub struct NativeEventStream {
    receiver: std::sync::Mutex<mpsc::Receiver<String>>,
    doorbell: Arc<Doorbell>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    /// Says whether the producer waits on JavaScript alone; none: it never does.
    idle_check: Option<IdleCheck>,
}

impl NativeEventStream {
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
    #[napi(js_name = "takeJson", ts_return_type = "string | null | undefined")]
    pub fn take_json(&self) -> napi::Result<Taken> {
        guard::sync(|| {
            let mut receiver = self.receiver.lock().unwrap_or_else(PoisonError::into_inner);
            let first = {
                let mut state = self.doorbell.lock();
                match receiver.try_recv() {
                    Ok(item) => item,
                    Err(mpsc::error::TryRecvError::Empty) => {
                        state.waiting = true;
                        return Ok(Taken::NotYet);
                    }
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        drop(state);
                        self.doorbell.release();
                        return Ok(Taken::Ended);
                    }
                }
            };
            let mut batch = String::with_capacity(first.len() + 2);
            batch.push('[');
            batch.push_str(&first);
            while let Ok(item) = receiver.try_recv() {
                batch.push(',');
                batch.push_str(&item);
            }
            batch.push(']');
            Ok(Taken::Batch(JsonBatch(batch)))
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
