//! # ferroloop-capi
//!
//! The C ABI of ferroloop: `libferroloop.so` / `libferroloop.a` and the header
//! `include/ferroloop.h`, generated from this crate by cbindgen (its doc comments become the
//! header's). See `README.md` for building and linking.
//!
//! Conventions, for every function:
//! - names start with `fl_`; objects are opaque handles made by `fl_X_new*` and released by
//!   `fl_X_free` (which accepts NULL);
//! - fallible functions return an `fl_status` whose numeric values never change; a failure also
//!   records a message readable with `fl_last_error_message` on the same thread;
//! - every pointer argument is checked for NULL (`FL_STATUS_NULL_ARGUMENT`); input text is a
//!   pointer and a length, must be UTF-8 (`FL_STATUS_INVALID_UTF8`), and may be NULL when the
//!   length is 0; a length above `isize::MAX` is `FL_STATUS_INVALID_ARGUMENT`;
//! - a Rust panic never unwinds into C: it is caught and returned as `FL_STATUS_PANIC`;
//! - every function documents who owns what it returns and which threads may call it.

// The exported names follow C conventions (`fl_status`, `FL_STATUS_OK`), not Rust's.
#![allow(non_camel_case_types)]

mod agent;
mod boundary;
mod client;
mod client_stream;
mod context;
mod debug;
mod decode;
mod exec;
mod options;
mod owned_runtime;
mod sse;
mod status;
mod text;
mod tokens;
mod tool_call;
mod turn;

pub use agent::{
    fl_agent, fl_agent_free, fl_agent_new, fl_agent_next, fl_agent_run, fl_agent_run_cancel,
    fl_agent_run_free, fl_agent_run_messages, fl_agent_run_next_event, fl_agent_run_start,
    fl_agent_run_start_prompt, fl_agent_tool_definitions,
};
pub use boundary::fl_last_error_message;
pub use client::{
    fl_client, fl_client_base_url, fl_client_free, fl_client_new, fl_client_provider,
};
pub use client_stream::{
    fl_client_create, fl_client_error, fl_client_stream_start, fl_message_stream,
    fl_message_stream_cancel, fl_message_stream_error, fl_message_stream_error_json,
    fl_message_stream_free, fl_message_stream_message, fl_message_stream_metrics,
    fl_message_stream_metrics_json, fl_message_stream_next_event, fl_message_stream_request_id,
    fl_request_metrics,
};
pub use context::{
    FL_CONTEXT_BUDGET_DEFAULT, fl_context_budget, fl_context_budget_free, fl_context_budget_new,
    fl_context_budget_new_for_model, fl_context_budget_options, fl_context_budget_options_default,
    fl_context_budget_percent_left, fl_context_budget_state, fl_context_budget_thresholds,
    fl_context_state, fl_context_thresholds, fl_context_tracker,
    fl_context_tracker_bytes_estimated, fl_context_tracker_correction, fl_context_tracker_free,
    fl_context_tracker_len, fl_context_tracker_new, fl_context_tracker_push_message,
    fl_context_tracker_record_usage, fl_context_tracker_record_usage_at,
    fl_context_tracker_replace_messages, fl_context_tracker_set_correction,
    fl_context_tracker_set_system, fl_context_tracker_set_tools, fl_context_tracker_tokens,
    fl_context_tracker_truncate, fl_count_method, fl_token_count,
};
pub use debug::{fl_debug_panic, fl_version};
pub use decode::{
    fl_decoder, fl_decoder_feed, fl_decoder_finish, fl_decoder_free, fl_decoder_is_complete,
    fl_decoder_message, fl_decoder_new, fl_decoder_next_event, fl_decoder_set_record_events,
};
pub use exec::{
    fl_cancel_token, fl_cancel_token_cancel, fl_cancel_token_free, fl_cancel_token_is_cancelled,
    fl_cancel_token_new, fl_executor, fl_executor_add_tool, fl_executor_add_tool_json,
    fl_executor_add_tool_json_with_safety, fl_executor_add_tool_with_definition, fl_executor_free,
    fl_executor_new, fl_executor_new_json, fl_executor_options, fl_executor_options_default,
    fl_executor_run, fl_tool_concurrency_safe_fn, fl_tool_fn, fl_tool_invocation, fl_tool_options,
    fl_tool_options_default,
};
pub use sse::{
    fl_sse_event, fl_sse_item, fl_sse_item_callback, fl_sse_item_kind, fl_sse_parser,
    fl_sse_parser_dropped_events, fl_sse_parser_feed, fl_sse_parser_feed_each,
    fl_sse_parser_finish, fl_sse_parser_free, fl_sse_parser_last_event_id, fl_sse_parser_new,
    fl_sse_parser_new_with_max_event_bytes, fl_sse_parser_next, fl_sse_parser_retry,
};
pub use status::{fl_status, fl_status_message};
pub use tokens::{
    fl_request_estimate, fl_text_estimator, fl_text_estimator_estimate, fl_text_estimator_feed,
    fl_text_estimator_free, fl_text_estimator_new, fl_tokens_estimate_bytes,
    fl_tokens_estimate_request, fl_tokens_estimate_text,
};
pub use tool_call::{
    fl_tool_call, fl_tool_call_cancelled, fl_tool_complete, fl_tool_complete_json,
};
pub use turn::{
    fl_call_status, fl_turn, fl_turn_cancel, fl_turn_event, fl_turn_event_kind, fl_turn_free,
    fl_turn_new, fl_turn_next_event, fl_turn_results, fl_turn_seal, fl_turn_submit,
};
