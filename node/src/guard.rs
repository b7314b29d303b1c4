//! The panic boundary: every exported function body runs inside [`sync`], so a panic becomes an
//! error with code `internal` instead of unwinding into Node (which would abort the process).

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::{ErrorCode, FerroloopError};

/// Runs `body`, turning a panic into an `internal` error that carries the panic message.
///
/// `AssertUnwindSafe` is sound here because a caught panic is reported as an error and the
/// state it may have left half-updated is only ever reachable through the object whose method
/// panicked; the error tells the caller that object is no longer trustworthy.
pub fn sync<T>(body: impl FnOnce() -> napi::Result<T>) -> napi::Result<T> {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => result,
        Err(payload) => Err(panic_error(payload.as_ref()).into()),
    }
}

/// The error reported for a caught panic payload.
pub fn panic_error(payload: &(dyn std::any::Any + Send)) -> FerroloopError {
    let detail = if let Some(text) = payload.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = payload.downcast_ref::<String>() {
        text.clone()
    } else {
        "non-string panic payload".to_owned()
    };
    FerroloopError::new(ErrorCode::Internal, format!("ferroloop panicked: {detail}"))
}
