//! An event stream from the async runtime to JavaScript: a task on napi's tokio runtime
//! produces items (JSON text, serialized off the JS thread) into a bounded channel, and the JS
//! wrapper pulls them in batches with `next()`, one Promise per batch rather than per event.
//! `abort()` cancels the producer at once; the stream then ends with an `aborted` error item.
//! Dropping the handle (garbage collection) cancels the producer too.

use std::future::Future;

use ferroloop::exec::CancellationToken;
use futures_util::FutureExt;
use napi_derive::napi;
use serde_json::json;
use tokio::sync::{Mutex, mpsc};

use napi::bindgen_prelude::ToNapiValue;
use napi::{Env, JsValue, sys};

use crate::batch::js_string;
use crate::error::{ErrorCode, FerroloopError};
use crate::guard;

/// How many produced items may wait for JavaScript before the producer waits (backpressure).
const CHANNEL_ITEMS: usize = 1024;

/// The producer's side: sends JSON items; a closed channel means JavaScript is gone.
#[derive(Clone)]
pub struct ItemSink {
    sender: mpsc::Sender<String>,
}

impl ItemSink {
    /// Sends one JSON item; false when nobody listens any more.
    pub async fn send(&self, item: String) -> bool {
        self.sender.send(item).await.is_ok()
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
}

/// An error item: the code, message, status and request id, plus `extra` fields.
pub fn error_item(
    error: &FerroloopError,
    extra: serde_json::Map<String, serde_json::Value>,
) -> String {
    let mut fields = json!({
        "code": error.code.as_str(),
        "message": error.message,
        "status": error.status,
        "requestId": error.request_id,
    });
    if let Some(object) = fields.as_object_mut() {
        object.extend(extra);
    }
    json!({"type": "error", "error": fields}).to_string()
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
/// `internal` error item.
pub fn start<F, Fut>(on_abort: OnAbort, produce: F) -> napi::Result<NativeEventStream>
where
    F: FnOnce(ItemSink, CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (sender, receiver) = mpsc::channel(CHANNEL_ITEMS);
    let cancel = CancellationToken::new();
    let sink = ItemSink { sender };
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
    });
    Ok(NativeEventStream {
        receiver: Mutex::new(receiver),
        cancel,
        task,
    })
}

/// A stream of JSON items produced on the async runtime.
#[napi(js_name = "EventStream")]
pub struct NativeEventStream {
    receiver: Mutex<mpsc::Receiver<String>>,
    cancel: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

#[napi]
impl NativeEventStream {
    /// The next batch of items as a JSON array (every item ready now, at least one), or `null`
    /// once the stream has ended.
    #[napi(js_name = "nextJson", ts_return_type = "Promise<string | null>")]
    pub async fn next_json(&self) -> napi::Result<Option<JsonBatch>> {
        guard::future(async {
            let mut receiver = self.receiver.lock().await;
            let Some(first) = receiver.recv().await else {
                return Ok(None);
            };
            let mut batch = String::with_capacity(first.len() + 2);
            batch.push('[');
            batch.push_str(&first);
            while let Ok(item) = receiver.try_recv() {
                batch.push(',');
                batch.push_str(&item);
            }
            batch.push(']');
            Ok(Some(JsonBatch(batch)))
        })
        .await
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
        self.cancel.cancel();
        // The producer ends on the cancellation; aborting the task as well stops one that is
        // stuck outside a cancellation point.
        self.task.abort();
    }
}
