//! Server-Sent-Events parsing (in progress).
