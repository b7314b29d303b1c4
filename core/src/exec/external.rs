//! Calls the host runs and answers itself (see [`Turn::enable_external_calls`]).
//!
//! A host that polls its turn on its own thread (a JavaScript event loop) can start the calls
//! of its tools directly and report their outcomes in batches, without a future per call: the
//! turn keeps admission, ordering, cancellation, sibling failures and result limits, and an
//! external call is one entry in a table indexed by its position in the turn. What the host
//! must do: start the calls listed by [`Turn::take_external_work`], abort the ones listed there
//! as aborted, and answer each started call once with [`Turn::complete_external`].
//!
//! A host that keeps the text of an answer (it already holds it) can answer with its length
//! alone ([`Turn::complete_external_held`]) when the turn has no use for the text: events off
//! and the text within its result limit. Should the turn's aggregate budget need the texts at
//! the end, the turn asks for them ([`Turn::take_external_text_requests`]) and waits for
//! [`Turn::provide_external_text`].
//!
//! A cancelled turn asks the host to abort its running external calls and gives them one
//! cleanup grace, measured from the cancellation, for the whole turn (one timer, not one per
//! call); a call still unanswered past it is answered as cancelled and reported detached.
//!
//! [`Turn::enable_external_calls`]: super::Turn::enable_external_calls
//! [`Turn::take_external_work`]: super::Turn::take_external_work
//! [`Turn::complete_external`]: super::Turn::complete_external
//! [`Turn::complete_external_held`]: super::Turn::complete_external_held
//! [`Turn::take_external_text_requests`]: super::Turn::take_external_text_requests
//! [`Turn::provide_external_text`]: super::Turn::provide_external_text

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;

use tokio::time::{Instant, Sleep};

use super::admission::Concurrency;
use super::tool::RegisteredTool;

/// One running external call.
pub(crate) struct Running {
    pub(crate) tool: Arc<RegisteredTool>,
    pub(crate) concurrency: Concurrency,
    /// When it started (kept when the turn reports durations).
    pub(crate) started: Option<Instant>,
    /// The host was asked to abort it.
    pub(crate) aborting: bool,
}

/// A call's entry, by its index in the turn.
enum Entry {
    /// Not an external call, or not started yet.
    Idle,
    Running(Running),
    /// Answered; `kept`: its result content is the host's, unchanged.
    Answered {
        kept: bool,
    },
    /// Answered with a text the host keeps (the result holds an empty placeholder): at most
    /// `chars` characters long.
    Held {
        chars: usize,
    },
}

/// The external calls of one turn.
pub(crate) struct ExternalCalls {
    entries: Vec<Entry>,
    running: usize,
    starts: Vec<u32>,
    aborts: Vec<u32>,
    /// The cleanup grace of the calls being aborted.
    grace: Option<Pin<Box<Sleep>>>,
    /// How many answers are held by the host, and their characters (an upper bound).
    held: usize,
    held_chars: usize,
    /// Held answers whose text the turn asks for (not yet taken by the host).
    text_requests: Vec<u32>,
    /// Whether the held texts were asked for (once per turn).
    texts_requested: bool,
}

fn index_u32(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}

impl ExternalCalls {
    pub(crate) fn new() -> Self {
        Self {
            entries: Vec::new(),
            running: 0,
            starts: Vec::new(),
            aborts: Vec::new(),
            grace: None,
            held: 0,
            held_chars: 0,
            text_requests: Vec::new(),
            texts_requested: false,
        }
    }

    /// Makes room for calls up to `len` in the turn.
    pub(crate) fn reserve(&mut self, len: usize) {
        self.entries.reserve(len.saturating_sub(self.entries.len()));
    }

    /// Records that call `index` starts, and asks the host to start it.
    pub(crate) fn start(&mut self, index: usize, call: Running) {
        if self.entries.len() <= index {
            self.entries.resize_with(index + 1, || Entry::Idle);
        }
        self.entries[index] = Entry::Running(call);
        self.running += 1;
        self.starts.push(index_u32(index));
    }

    /// Takes the running call `index`, if it is one.
    pub(crate) fn take(&mut self, index: usize) -> Option<Running> {
        let entry = self.entries.get_mut(index)?;
        if !matches!(entry, Entry::Running(_)) {
            return None;
        }
        match std::mem::replace(entry, Entry::Answered { kept: false }) {
            Entry::Running(call) => {
                self.running -= 1;
                Some(call)
            }
            _ => None,
        }
    }

    /// The tool of call `index`, when it is running.
    pub(crate) fn running_tool(&self, index: usize) -> Option<&Arc<RegisteredTool>> {
        match self.entries.get(index) {
            Some(Entry::Running(call)) => Some(&call.tool),
            _ => None,
        }
    }

    /// Whether call `index` is running.
    pub(crate) fn is_running(&self, index: usize) -> bool {
        matches!(self.entries.get(index), Some(Entry::Running(_)))
    }

    /// Marks the result of the answered call `index` as the host's content, unchanged.
    pub(crate) fn keep(&mut self, index: usize) {
        if let Some(entry @ Entry::Answered { .. }) = self.entries.get_mut(index) {
            *entry = Entry::Answered { kept: true };
        }
    }

    /// Marks the answered call `index` as held: its result is an empty placeholder for a text
    /// of at most `chars` characters that the host keeps.
    pub(crate) fn hold(&mut self, index: usize, chars: usize) {
        if let Some(entry @ Entry::Answered { kept: true }) = self.entries.get_mut(index) {
            *entry = Entry::Held { chars };
            self.held += 1;
            self.held_chars = self.held_chars.saturating_add(chars);
        }
    }

    /// The upper bound of the held texts' characters, when some are held.
    pub(crate) fn held_chars(&self) -> Option<usize> {
        (self.held > 0).then_some(self.held_chars)
    }

    /// Asks the host for every held text (once). Returns whether some are still awaited.
    pub(crate) fn request_held_texts(&mut self) -> bool {
        if self.held > 0 && !self.texts_requested {
            self.texts_requested = true;
            for (index, entry) in self.entries.iter().enumerate() {
                if matches!(entry, Entry::Held { .. }) {
                    self.text_requests.push(index_u32(index));
                }
            }
        }
        self.held > 0
    }

    /// Moves the held answers whose text the turn needs into `requests` (cleared first).
    pub(crate) fn take_text_requests(&mut self, requests: &mut Vec<u32>) {
        requests.clear();
        std::mem::swap(requests, &mut self.text_requests);
    }

    /// The host gave the text of held answer `index`: it is an ordinary kept answer again.
    /// Returns false when `index` is not held.
    pub(crate) fn unhold(&mut self, index: usize) -> bool {
        match self.entries.get_mut(index) {
            Some(entry @ Entry::Held { .. }) => {
                let Entry::Held { chars } =
                    std::mem::replace(entry, Entry::Answered { kept: true })
                else {
                    return false;
                };
                self.held -= 1;
                self.held_chars -= chars.min(self.held_chars);
                true
            }
            _ => false,
        }
    }

    /// Whether the result of call `index` is the content its host delivered, unchanged (or a
    /// placeholder for it, when held).
    pub(crate) fn kept(&self, index: usize) -> bool {
        matches!(
            self.entries.get(index),
            Some(Entry::Answered { kept: true } | Entry::Held { .. })
        )
    }

    /// Forgets which results are unchanged (the turn budget replaced some). Never called while
    /// answers are held (their texts are asked for first).
    pub(crate) fn forget_kept(&mut self) {
        for entry in &mut self.entries {
            if let Entry::Answered { kept } = entry {
                *kept = false;
            }
        }
    }

    /// Asks the host to abort every running call, which then gets `grace` to answer. Needs a
    /// tokio runtime with time when any call runs.
    pub(crate) fn abort_all(&mut self, grace: std::time::Duration) {
        if self.running == 0 {
            return;
        }
        for (index, entry) in self.entries.iter_mut().enumerate() {
            if let Entry::Running(call) = entry
                && !call.aborting
            {
                call.aborting = true;
                self.aborts.push(index_u32(index));
            }
        }
        self.grace = Some(Box::pin(tokio::time::sleep(grace)));
    }

    /// Whether aborted calls are still running on their cleanup grace (its timer armed).
    pub(crate) fn grace_counting(&self) -> bool {
        self.grace.is_some() && self.running > 0
    }

    /// When the grace of the aborted calls ran out: takes every call still running (each with
    /// its index).
    pub(crate) fn poll_grace_expired(&mut self, cx: &mut Context<'_>) -> Vec<(usize, Running)> {
        let Some(grace) = self.grace.as_mut() else {
            return Vec::new();
        };
        if self.running == 0 {
            self.grace = None;
            return Vec::new();
        }
        if grace.as_mut().poll(cx).is_pending() {
            return Vec::new();
        }
        self.grace = None;
        let mut expired = Vec::new();
        for index in 0..self.entries.len() {
            if self.is_running(index)
                && let Some(call) = self.take(index)
            {
                expired.push((index, call));
            }
        }
        expired
    }

    /// Moves the calls to start and to abort into `starts` and `aborts` (cleared first; the
    /// buffers are swapped, so both sides keep their capacity).
    pub(crate) fn take_work(&mut self, starts: &mut Vec<u32>, aborts: &mut Vec<u32>) {
        starts.clear();
        aborts.clear();
        std::mem::swap(starts, &mut self.starts);
        std::mem::swap(aborts, &mut self.aborts);
    }
}
