//! Events produced by the parser: borrowed views and their owned forms.

use bytes::Bytes;

use crate::Utf8Bytes;

impl SseItem<'_> {
    /// The item with its event's source buffers removed (see `SseEventRef::without_sources`).
    pub(crate) fn without_sources(self) -> Self {
        match self {
            Self::Event(event) => Self::Event(event.without_sources()),
            retry @ Self::Retry(_) => retry,
        }
    }
}

/// One completed item of an event stream.
#[derive(Debug)]
pub enum SseItem<'a> {
    /// A dispatched event, borrowing the parser until its next call.
    Event(SseEventRef<'a>),
    /// A valid `retry` field, in milliseconds, reported at the point it was read.
    Retry(u64),
}

/// A dispatched event that borrows its text from the input chunk or the parser's buffers.
#[derive(Debug, Clone, Copy)]
pub struct SseEventRef<'a> {
    event_type: &'a str,
    /// The buffer `event_type` lies in, when it can be shared instead of copied.
    event_type_source: Option<&'a Bytes>,
    data: &'a str,
    /// The buffer `data` lies in, when it can be shared instead of copied.
    data_source: Option<&'a Bytes>,
    id: &'a Utf8Bytes,
}

impl<'a> SseEventRef<'a> {
    pub(crate) fn new(
        event_type: &'a str,
        event_type_source: Option<&'a Bytes>,
        data: &'a str,
        data_source: Option<&'a Bytes>,
        id: &'a Utf8Bytes,
    ) -> Self {
        Self {
            event_type,
            event_type_source,
            data,
            data_source,
            id,
        }
    }

    /// The same view without its source buffers (so that [`to_owned`](Self::to_owned) copies):
    /// for an event read from a chunk that is not a `Bytes` the parser may share.
    pub(crate) fn without_sources(self) -> Self {
        Self {
            event_type_source: None,
            data_source: None,
            ..self
        }
    }

    /// The event type (`message` when the stream named none).
    pub fn event_type(&self) -> &'a str {
        self.event_type
    }

    /// The data, its lines joined by LF, without the final LF.
    pub fn data(&self) -> &'a str {
        self.data
    }

    /// The last event id in force when the event was dispatched (empty when none).
    pub fn id(&self) -> &'a str {
        self.id.as_str()
    }

    /// True when the data is a slice of an input chunk (it was not copied).
    pub fn is_data_borrowed(&self) -> bool {
        self.data_source.is_some()
    }

    /// The data as shared bytes: a reference-counted slice of the input chunk when the data was
    /// a single line inside one chunk, a copy of the parser's buffer otherwise.
    pub fn data_shared(&self) -> Utf8Bytes {
        share(self.data, self.data_source)
    }

    /// An owned copy of the event, sharing the input's storage wherever possible.
    pub fn to_owned(&self) -> SseEvent {
        let event_type = match self.event_type_source {
            Some(_) => share(self.event_type, self.event_type_source),
            None if self.event_type == "message" => Utf8Bytes::from_static("message"),
            None => Utf8Bytes::copy_from_str(self.event_type),
        };
        SseEvent {
            event_type,
            data: self.data_shared(),
            id: self.id.clone(),
        }
    }
}

/// An owned event. Its fields share storage with the input chunks where they could.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SseEvent {
    /// The event type (`message` when the stream named none).
    pub event_type: Utf8Bytes,
    /// The data, its lines joined by LF, without the final LF.
    pub data: Utf8Bytes,
    /// The last event id in force when the event was dispatched (empty when none).
    pub id: Utf8Bytes,
}

impl SseEvent {
    /// A borrowed view of this event.
    pub fn as_ref(&self) -> SseEventRef<'_> {
        SseEventRef::new(
            &self.event_type,
            Some(self.event_type.as_bytes()),
            &self.data,
            Some(self.data.as_bytes()),
            &self.id,
        )
    }
}

/// `text` as shared bytes: a slice of `source` (which must contain it) or a copy.
fn share(text: &str, source: Option<&Bytes>) -> Utf8Bytes {
    match source {
        Some(source) if contains(source, text) => {
            // SAFETY: the slice covers exactly the bytes of `text`, which is a `str`.
            unsafe { Utf8Bytes::from_bytes_unchecked(source.slice_ref(text.as_bytes())) }
        }
        _ => Utf8Bytes::copy_from_str(text),
    }
}

/// Whether `text` lies inside `source`'s memory (`Bytes::slice_ref` requires it, or panics).
fn contains(source: &Bytes, text: &str) -> bool {
    let start = source.as_ptr() as usize;
    let inner = text.as_ptr() as usize;
    inner >= start && inner + text.len() <= start + source.len()
}
