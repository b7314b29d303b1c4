//! Token estimation and context budgeting (`ferroloop::tokens`).

use ferroloop::tokens::budget::{BudgetOverrides, InvalidBudget};
use ferroloop::tokens::{
    ContextBudget, ContextTracker, Family, InvalidUsage, ModelTable, TextEstimator, Usage,
    estimate_bytes, estimate_request_body, estimate_text, estimate_value,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString,
};
use serde_json::Value;

use crate::args::{
    count_arg, float_arg, float_arg_opt, float_text, int_arg_opt, non_negative_opt,
    saturating_count, saturating_len, str_arg,
};
use crate::errors::{exclusive, shared, shield};
use crate::sse::{chunk_bytes, detach_if_large};

fn family(name: &str) -> PyResult<Family> {
    name.parse::<Family>()
        .map_err(|err| PyValueError::new_err(err.to_string()))
}

/// A `tokenizer` argument (taken `from_py_with`), as the family's own name: a `TypeError`
/// naming the argument for a value that is not a `str` (pyo3's conversion named neither it nor
/// the type expected), a `ValueError` for an unknown family. Taken this way rather than as
/// `&Bound<PyAny>` so that the default stays the literal `"claude"` of the signature, which
/// Python's `__text_signature__` (and so stubtest) shows; a `&'static str`, which that default
/// also is, as the extraction must not borrow from a `str` it may have had to copy.
fn tokenizer_arg(value: &Bound<'_, PyAny>) -> PyResult<&'static str> {
    Ok(family(&str_arg("tokenizer", value)?)?.name())
}

/// A value to count as JSON: a lone surrogate in a `str` inside it counts as U+FFFD, as in a
/// plain `str` and in Node's objects (it was a `ValueError`).
fn json_of(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    crate::value::to_value_for_counting(obj).map_err(|err| {
        PyValueError::new_err(format!("the value cannot be converted to JSON: {err}"))
    })
}

/// Estimates the tokens of `obj` for a tokenizer family (`"claude"`, `"claude-legacy"`,
/// `"o200k"`, `"cl100k"`): a `str` (or `bytes`, `bytearray`, `memoryview`: UTF-8) is text; a list is a list of messages; a dict
/// with `messages`, `system` or `tools` (or an OpenAI Responses body's `input` or `instructions`)
/// is a request body (overheads included); a dict with a
/// `role` is one message; any other dict is one content block. Large text is estimated with the
/// interpreter released.
#[pyfunction]
#[pyo3(signature = (obj, *, tokenizer = "claude"))]
fn estimate_tokens(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = tokenizer_arg)] tokenizer: &str,
) -> PyResult<u64> {
    shield(py, "estimate_tokens", || {
        let family = family(tokenizer)?;
        if let Ok(text) = obj.cast::<PyString>() {
            let text = text_of(text)?;
            return Ok(detach_if_large(py, text.len(), || {
                estimate_text(&text, family)
            }));
        }
        if let Ok(bytes) = obj.cast::<PyBytes>() {
            // `bytes` is immutable and `obj` keeps it alive: read in place, even released.
            let bytes = bytes.as_bytes();
            return Ok(detach_if_large(py, bytes.len(), || {
                estimate_bytes(bytes, family)
            }));
        }
        if obj.cast::<PyByteArray>().is_ok() || obj.cast::<PyMemoryView>().is_ok() {
            // Any bytes-like object, as Node takes any Uint8Array (copied while attached).
            let bytes = chunk_bytes(obj)?;
            return Ok(detach_if_large(py, bytes.len(), || {
                estimate_bytes(&bytes, family)
            }));
        }
        if obj.cast::<PyList>().is_ok() || obj.cast::<PyDict>().is_ok() {
            // A list of messages, a message, a block or a request body: the core tells which.
            let value = json_of(obj)?;
            if let Some(tokens) = py.detach(|| estimate_value(&value, family)) {
                return Ok(tokens);
            }
        }
        Err(PyTypeError::new_err(
            "estimate_tokens takes a str, a bytes-like object, a list of messages, a message, a content block or a request dict",
        ))
    })
}

/// The text of a `str` to count (see [`crate::value::lossy_text`]): a lone surrogate counts as
/// U+FFFD, as a JavaScript string's does in Node's `estimateTokens`.
fn text_of<'a>(text: &'a Bound<'_, PyString>) -> PyResult<std::borrow::Cow<'a, str>> {
    crate::value::lossy_text(text)
}

/// Estimates a request body (a dict with `system`, `tools`, `messages`, or an OpenAI Responses
/// body with `instructions`, `tools`, `input`) by part: a dict with
/// `system`, `tools`, `messages`, `overhead` and `total` (what Node's `estimateRequest` and C's
/// `fl_tokens_estimate_request` give; `estimate_tokens(body)` is the `total`).
#[pyfunction]
#[pyo3(signature = (body, *, tokenizer = "claude"))]
fn estimate_request<'py>(
    py: Python<'py>,
    body: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = tokenizer_arg)] tokenizer: &str,
) -> PyResult<Bound<'py, PyDict>> {
    shield(py, "estimate_request", || {
        let family = family(tokenizer)?;
        if body.cast::<PyDict>().is_err() {
            return Err(PyTypeError::new_err(
                "estimate_request takes a request dict (system, tools, messages)",
            ));
        }
        let value = json_of(body)?;
        let estimate = py.detach(|| estimate_request_body(&value, family));
        let dict = PyDict::new(py);
        dict.set_item("system", estimate.system)?;
        dict.set_item("tools", estimate.tools)?;
        dict.set_item("messages", estimate.messages)?;
        dict.set_item("overhead", estimate.overhead)?;
        dict.set_item("total", estimate.total())?;
        Ok(dict)
    })
}

/// A usage dict as JSON for [`Usage::parse`]: a float JSON cannot hold (`nan`, `inf`) or an int
/// past 64 bits at its top level crosses as its text, so the core refuses it naming the field
/// ([`usage_error`] then shows the value as given). The conversion to JSON makes the first
/// `null`, which a usage reads as absent: a `nan` input made the usage "output only", ignored
/// without a word (as Node's `recordUsage` does with `NaN`); the second its nearest float.
fn usage_json(usage: &Bound<'_, PyAny>) -> PyResult<Value> {
    let mut value = json_of(usage)?;
    if let (Ok(dict), Value::Object(fields)) = (usage.cast::<PyDict>(), &mut value) {
        for (key, item) in dict.iter() {
            let Ok(key) = key.extract::<String>() else {
                continue;
            };
            // Values JSON cannot hold as they are, kept as their text so that the core refuses
            // them: `nan` (which would be `null`, absent), and an int past 64 bits (which would
            // be its nearest float, refused too, but as a count no one gave).
            if let Ok(number) = item.cast::<PyFloat>()
                && !number.value().is_finite()
            {
                fields.insert(key, Value::String(float_text(number.value())));
            } else if item.is_instance_of::<PyInt>()
                && !item.is_instance_of::<PyBool>()
                && item.extract::<u64>().is_err()
                && item.extract::<i64>().is_err()
            {
                fields.insert(key, Value::String(item.str()?.to_string()));
            }
        }
    }
    Ok(value)
}

/// The core's refusal of a usage as a `ValueError`, the value refused written as Python writes
/// it (`repr`). The core writes it as JSON, which showed `nan` and an int past 64 bits (handed
/// over as their text, see [`usage_json`]) as strings (`got "nan"`), `True` as `true`, a `str`
/// in double quotes: values the caller did not write.
fn usage_error(usage: &Bound<'_, PyAny>, error: InvalidUsage) -> PyErr {
    let error = match error {
        InvalidUsage::NotACount { field, value } => {
            let shown = usage
                .cast::<PyDict>()
                .ok()
                .and_then(|dict| dict.get_item(field).ok().flatten())
                .and_then(|item| item.repr().ok())
                .map_or(value, |repr| repr.to_string());
            InvalidUsage::NotACount {
                field,
                value: shown,
            }
        }
        other => other,
    };
    PyValueError::new_err(error.to_string())
}

/// The optional settings of a `ContextBudget` (unset ones keep Claude Code's defaults).
struct Overrides {
    output_reserve_cap: Option<i128>,
    autocompact_buffer: Option<i128>,
    warning_buffer: Option<i128>,
    blocking_buffer: Option<i128>,
    autocompact_percent: Option<f64>,
}

impl Overrides {
    /// The settings as given, each of its type (a `TypeError` naming the one that is not).
    fn of(
        output_reserve_cap: Option<&Bound<'_, PyAny>>,
        autocompact_buffer: Option<&Bound<'_, PyAny>>,
        warning_buffer: Option<&Bound<'_, PyAny>>,
        blocking_buffer: Option<&Bound<'_, PyAny>>,
        autocompact_percent: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        Ok(Self {
            output_reserve_cap: int_arg_opt("output_reserve_cap", output_reserve_cap)?,
            autocompact_buffer: int_arg_opt("autocompact_buffer", autocompact_buffer)?,
            warning_buffer: int_arg_opt("warning_buffer", warning_buffer)?,
            blocking_buffer: int_arg_opt("blocking_buffer", blocking_buffer)?,
            autocompact_percent: float_arg_opt("autocompact_percent", autocompact_percent)?,
        })
    }

    /// The settings given, as the core takes them; a negative one is a `ValueError`.
    fn checked(self) -> PyResult<BudgetOverrides> {
        Ok(BudgetOverrides {
            output_reserve_cap: non_negative_opt("output_reserve_cap", self.output_reserve_cap)?,
            autocompact_buffer: non_negative_opt("autocompact_buffer", self.autocompact_buffer)?,
            warning_buffer: non_negative_opt("warning_buffer", self.warning_buffer)?,
            blocking_buffer: non_negative_opt("blocking_buffer", self.blocking_buffer)?,
            autocompact_percent: self.autocompact_percent,
        })
    }
}

/// The core's refusal of a budget ([`ContextBudget::with_overrides`]: settings given apply as
/// given, defaults scale; it must compact before it blocks, and not at zero tokens) as a
/// `ValueError`.
fn budget_error(error: InvalidBudget) -> PyErr {
    PyValueError::new_err(error.message_naming(|name| name))
}

/// Context thresholds for one model (Claude Code's defaults, every field configurable).
#[pyclass(module = "ferroloop._native", name = "ContextBudget", frozen)]
struct PyContextBudget {
    budget: ContextBudget,
}

#[pymethods]
impl PyContextBudget {
    /// A budget for a context window and the request's max output tokens.
    #[new]
    #[pyo3(signature = (window, max_output_tokens, *, output_reserve_cap = None, autocompact_buffer = None, warning_buffer = None, blocking_buffer = None, autocompact_percent = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        window: &Bound<'_, PyAny>,
        max_output_tokens: &Bound<'_, PyAny>,
        output_reserve_cap: Option<&Bound<'_, PyAny>>,
        autocompact_buffer: Option<&Bound<'_, PyAny>>,
        warning_buffer: Option<&Bound<'_, PyAny>>,
        blocking_buffer: Option<&Bound<'_, PyAny>>,
        autocompact_percent: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        shield(py, "ContextBudget.__init__", || {
            let window = count_arg("window", window)?;
            let max_output_tokens = count_arg("max_output_tokens", max_output_tokens)?;
            let overrides = Overrides::of(
                output_reserve_cap,
                autocompact_buffer,
                warning_buffer,
                blocking_buffer,
                autocompact_percent,
            )?
            .checked()?;
            let budget = ContextBudget::with_overrides(window, max_output_tokens, &overrides)
                .map_err(budget_error)?;
            Ok(Self { budget })
        })
    }

    /// The budget for a model name (context window and max output from the model table), with
    /// the same optional overrides as the constructor (as Node's
    /// `new ContextBudget({ model, ... })`). A model not in the table gets a 200,000-token
    /// window and 32,000 max output tokens, as in Node and C.
    #[staticmethod]
    #[pyo3(signature = (model, *, output_reserve_cap = None, autocompact_buffer = None, warning_buffer = None, blocking_buffer = None, autocompact_percent = None))]
    fn for_model(
        py: Python<'_>,
        model: &Bound<'_, PyAny>,
        output_reserve_cap: Option<&Bound<'_, PyAny>>,
        autocompact_buffer: Option<&Bound<'_, PyAny>>,
        warning_buffer: Option<&Bound<'_, PyAny>>,
        blocking_buffer: Option<&Bound<'_, PyAny>>,
        autocompact_percent: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        shield(py, "ContextBudget.for_model", || {
            let model = str_arg("model", model)?;
            let overrides = Overrides::of(
                output_reserve_cap,
                autocompact_buffer,
                warning_buffer,
                blocking_buffer,
                autocompact_percent,
            )?
            .checked()?;
            let budget =
                ContextBudget::for_model_with_overrides(&model, &ModelTable::default(), &overrides)
                    .map_err(budget_error)?;
            Ok(Self { budget })
        })
    }

    /// The context window.
    #[getter]
    fn window(&self) -> u64 {
        self.budget.window
    }

    /// The max output tokens.
    #[getter]
    fn max_output_tokens(&self) -> u64 {
        self.budget.max_output_tokens
    }

    /// Window minus the output reserve.
    #[getter]
    fn effective_window(&self) -> u64 {
        self.budget.effective_window()
    }

    /// Compact before the next request at or above this count.
    #[getter]
    fn autocompact_threshold(&self) -> u64 {
        self.budget.autocompact_threshold()
    }

    /// Warn at or above this count.
    #[getter]
    fn warning_threshold(&self) -> u64 {
        self.budget.warning_threshold()
    }

    /// Do not send without compacting at or above this count.
    #[getter]
    fn blocking_threshold(&self) -> u64 {
        self.budget.blocking_threshold()
    }

    /// `"ok"`, `"warning"`, `"auto_compact"` or `"blocking"` for a token count (the names of
    /// Node's `state()` and the core's `BudgetState::as_str`); a count beyond 64 bits is
    /// `"blocking"`, as in Node.
    fn state(&self, tokens: &Bound<'_, PyAny>) -> PyResult<&'static str> {
        Ok(self
            .budget
            .state(saturating_count("tokens", tokens)?)
            .as_str())
    }

    /// The percentage of the auto-compact threshold still free (0 for a count beyond 64 bits).
    fn percent_left(&self, tokens: &Bound<'_, PyAny>) -> PyResult<f64> {
        Ok(self
            .budget
            .percent_left(saturating_count("tokens", tokens)?))
    }

    fn __repr__(&self) -> String {
        format!(
            "ContextBudget(window={}, max_output_tokens={})",
            self.budget.window, self.budget.max_output_tokens
        )
    }
}

/// The class name in [`crate::errors::exclusive`]'s error.
const TRACKER: &str = "ContextTracker";

/// Tracks a conversation's token count: the provider's `usage` is authoritative for the prefix
/// it covered; only messages appended after it are estimated (with a learned correction).
///
/// Not shared across threads: a call while another thread is in one (which releases the
/// interpreter to estimate) raises `InvalidStateError` and changes nothing.
#[pyclass(module = "ferroloop._native", name = "ContextTracker")]
struct PyContextTracker {
    /// Boxed: Python allocates objects with 16-byte alignment only; core types may need more.
    tracker: Box<ContextTracker>,
}

#[pymethods]
impl PyContextTracker {
    /// A tracker for a tokenizer family.
    #[new]
    #[pyo3(signature = (*, tokenizer = "claude"))]
    fn new(
        py: Python<'_>,
        #[pyo3(from_py_with = tokenizer_arg)] tokenizer: &str,
    ) -> PyResult<Self> {
        shield(py, "ContextTracker.__init__", || {
            Ok(Self {
                tracker: Box::new(ContextTracker::new(family(tokenizer)?)),
            })
        })
    }

    /// Sets the system prompt (a str, a list of blocks, or None for none; anything else is a
    /// `TypeError` and the tracker is left unchanged).
    fn set_system(slf: &Bound<'_, Self>, system: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        shield(py, "ContextTracker.set_system", || {
            let mut this = exclusive(slf, TRACKER)?;
            let system = json_of(system)?;
            // Estimating a large value takes a while: done with the interpreter released.
            let tracker = &mut this.tracker;
            py.detach(move || tracker.try_set_system(&system))
                .map_err(|error| PyTypeError::new_err(error.to_string()))
        })
    }

    /// Sets the tool definitions (a list, or None for none; anything else, such as one tool's
    /// dict, is a `TypeError` and the tracker is left unchanged).
    fn set_tools(slf: &Bound<'_, Self>, tools: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        shield(py, "ContextTracker.set_tools", || {
            let mut this = exclusive(slf, TRACKER)?;
            let tools = json_of(tools)?;
            let tracker = &mut this.tracker;
            py.detach(move || tracker.try_set_tools(&tools))
                .map_err(|error| PyTypeError::new_err(error.to_string()))
        })
    }

    /// Appends a message (a dict: a message or an OpenAI Responses item; else `TypeError`).
    fn push_message(slf: &Bound<'_, Self>, message: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        shield(py, "ContextTracker.push_message", || {
            let mut this = exclusive(slf, TRACKER)?;
            let message = json_of(message)?;
            let tracker = &mut this.tracker;
            py.detach(move || tracker.try_push_message(&message))
                .map_err(|error| PyTypeError::new_err(error.to_string()))
        })
    }

    /// Replaces every message (e.g. after compaction); the usage recorded stays if the messages
    /// it covered open the new list unchanged. A list holding anything but dicts is a
    /// `TypeError` naming the first, and the tracker is left unchanged.
    fn replace_messages(slf: &Bound<'_, Self>, messages: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        shield(py, "ContextTracker.replace_messages", || {
            let mut this = exclusive(slf, TRACKER)?;
            let Value::Array(messages) = json_of(messages)? else {
                return Err(PyTypeError::new_err("expected a list of messages"));
            };
            let tracker = &mut this.tracker;
            py.detach(move || tracker.try_replace_messages(&messages))
                .map_err(|error| PyTypeError::new_err(error.to_string()))
        })
    }

    /// Keeps the first `length` messages (all of them when `length` is more than there are).
    fn truncate(slf: &Bound<'_, Self>, length: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        shield(py, "ContextTracker.truncate", || {
            let length = saturating_len("length", length)?;
            exclusive(slf, TRACKER)?.tracker.truncate(length);
            Ok(())
        })
    }

    /// Records a response's `usage` dict (Anthropic or OpenAI shape), covering every message
    /// so far, or the first `covered` messages (more than the messages tracked counts as all
    /// of them, as in Node and C). A count that is not a non-negative int (`nan`
    /// and `inf` included; `None` is absent), or no count at all: `ValueError`.
    #[pyo3(signature = (usage, *, covered = None))]
    fn record_usage(
        slf: &Bound<'_, Self>,
        usage: &Bound<'_, PyAny>,
        covered: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let py = slf.py();
        shield(py, "ContextTracker.record_usage", || {
            let covered = covered
                .map(|covered| saturating_len("covered", covered))
                .transpose()?;
            let usage =
                Usage::parse(&usage_json(usage)?).map_err(|error| usage_error(usage, error))?;
            let mut this = exclusive(slf, TRACKER)?;
            match covered {
                Some(covered) => this.tracker.record_usage_at(usage, covered),
                None => this.tracker.record_usage(usage),
            }
            Ok(())
        })
    }

    /// The current count: `{"tokens": int, "method": "exact" | "usage+estimate" | "estimate"}`.
    fn tokens<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        shield(py, "ContextTracker.tokens", || {
            let count = shared(slf, TRACKER)?.tracker.tokens();
            let dict = PyDict::new(py);
            dict.set_item("tokens", count.tokens)?;
            dict.set_item("method", count.method.as_str())?;
            Ok(dict)
        })
    }

    /// The current model's learned correction factor applied to estimates.
    #[getter]
    fn correction(slf: &Bound<'_, Self>) -> PyResult<f64> {
        Ok(shared(slf, TRACKER)?.tracker.correction())
    }

    /// Overrides the correction factor (e.g. restored from an earlier session with the same
    /// model); the core clamps it to its range. Not positive and finite: `ValueError`.
    #[setter]
    fn set_correction(slf: &Bound<'_, Self>, correction: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        shield(py, "ContextTracker.correction", || {
            let correction = float_arg("correction", correction)?;
            exclusive(slf, TRACKER)?
                .tracker
                .set_correction(correction)
                .map_err(|error| {
                    // The core's message writes the float as Rust does (`NaN`, 301 digits).
                    PyValueError::new_err(format!(
                        "the correction factor must be a positive number, got {}",
                        float_text(error.0)
                    ))
                })
        })
    }

    /// The model whose correction factor applies; setting it selects the model the next
    /// requests go to (each model learns its own factor). `""` until set.
    #[getter]
    fn model(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(shared(slf, TRACKER)?.tracker.model().to_owned())
    }

    /// Selects a model (see the getter): one selected before gets its factor back, a new one
    /// starts from the current factor; usage recorded before the selection stays but is no
    /// longer exact.
    #[setter]
    fn set_model(slf: &Bound<'_, Self>, model: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        shield(py, "ContextTracker.model", || {
            let model = str_arg("model", model)?;
            exclusive(slf, TRACKER)?.tracker.set_model(&model);
            Ok(())
        })
    }

    /// The correction factor `model` learned, or `None` if it was never selected.
    fn correction_for(slf: &Bound<'_, Self>, model: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
        let model = str_arg("model", model)?;
        Ok(shared(slf, TRACKER)?.tracker.correction_for(&model))
    }

    /// Total bytes fed to the estimator so far (unchanged messages cost nothing again).
    #[getter]
    fn bytes_estimated(slf: &Bound<'_, Self>) -> PyResult<u64> {
        Ok(shared(slf, TRACKER)?.tracker.bytes_estimated())
    }

    /// The tokenizer family.
    #[getter]
    fn tokenizer(slf: &Bound<'_, Self>) -> PyResult<&'static str> {
        Ok(shared(slf, TRACKER)?.tracker.family().name())
    }

    /// The number of messages tracked.
    fn __len__(slf: &Bound<'_, Self>) -> PyResult<usize> {
        Ok(shared(slf, TRACKER)?.tracker.len())
    }
}

/// Counts the tokens of `text` exactly with the offline vocabulary of `tokenizer` (`"o200k"` or
/// `"cl100k"`), with the interpreter released. Raises `ValueError` for a family without an
/// offline vocabulary (the Claude families: use `estimate_tokens`), in every build, and
/// `ExactCountingUnavailableError` for the others when the extension was built without the
/// `exact` feature.
#[pyfunction]
fn count_tokens(
    py: Python<'_>,
    text: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = tokenizer_arg)] tokenizer: &str,
) -> PyResult<u64> {
    shield(py, "count_tokens", || {
        let family = family(tokenizer)?;
        let text = text
            .cast::<PyString>()
            .map_err(|_| PyTypeError::new_err("count_tokens counts a str"))?;
        let text = text_of(text)?;
        count_exact(py, &text, family)
    })
}

#[cfg(feature = "exact")]
fn count_exact(py: Python<'_>, text: &str, family: Family) -> PyResult<u64> {
    py.detach(|| ferroloop::tokens::count_exact(text, family))
        .map_err(|err| PyValueError::new_err(err.to_string()))
}

#[cfg(not(feature = "exact"))]
fn count_exact(py: Python<'_>, _text: &str, family: Family) -> PyResult<u64> {
    // A family no build can count is the `ValueError` of a build with the feature.
    ferroloop::tokens::exact_family(family)
        .map_err(|err| PyValueError::new_err(err.to_string()))?;
    Err(crate::errors::ferroloop_error(
        py,
        "ExactCountingUnavailableError",
        &format!(
            "exact counting ({family}) is not in this build of ferroloop: build the extension \
             with the cargo feature `exact` (maturin develop --features exact); \
             estimate_tokens works without it"
        ),
        &[],
    ))
}

/// Whether this build counts tokens exactly (`count_tokens`; the cargo feature `exact`).
#[pyfunction]
fn has_exact_counting() -> bool {
    cfg!(feature = "exact")
}

/// The class name in [`crate::errors::exclusive`]'s error.
const ESTIMATOR: &str = "TextEstimator";

/// The token estimate of a text fed in pieces (a file read in blocks, a subprocess's output):
/// the estimate of the whole text, in memory bounded by its longest line.
///
/// Not shared across threads: a call while another thread is in one (a large `feed` releases
/// the interpreter) raises `InvalidStateError`; a refused `feed` did not add its piece.
#[pyclass(module = "ferroloop._native", name = "TextEstimator")]
struct PyTextEstimator {
    estimator: TextEstimator,
}

#[pymethods]
impl PyTextEstimator {
    /// An estimator for a tokenizer family, before any text.
    #[new]
    #[pyo3(signature = (*, tokenizer = "claude"))]
    fn new(
        py: Python<'_>,
        #[pyo3(from_py_with = tokenizer_arg)] tokenizer: &str,
    ) -> PyResult<Self> {
        shield(py, "TextEstimator.__init__", || {
            Ok(Self {
                estimator: TextEstimator::new(family(tokenizer)?),
            })
        })
    }

    /// Adds the next piece: a `str`, or `bytes`, `bytearray` or `memoryview` (UTF-8; a
    /// multibyte character may be split between two pieces).
    fn feed(slf: &Bound<'_, Self>, piece: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = slf.py();
        shield(py, "TextEstimator.feed", || {
            let mut this = exclusive(slf, ESTIMATOR)?;
            let estimator = &mut this.estimator;
            if let Ok(text) = piece.cast::<PyString>() {
                let text = text_of(text)?;
                detach_if_large(py, text.len(), || estimator.feed(text.as_bytes()));
                return Ok(());
            }
            if let Ok(bytes) = piece.cast::<PyBytes>() {
                // Immutable and kept alive by `piece`: read in place, even released.
                let bytes = bytes.as_bytes();
                detach_if_large(py, bytes.len(), || estimator.feed(bytes));
                return Ok(());
            }
            if piece.cast::<PyByteArray>().is_ok() || piece.cast::<PyMemoryView>().is_ok() {
                let bytes = chunk_bytes(piece)?;
                detach_if_large(py, bytes.len(), || estimator.feed(&bytes));
                return Ok(());
            }
            Err(PyTypeError::new_err(format!(
                "TextEstimator.feed takes str or bytes (any bytes-like object), not {}",
                piece.get_type().name()?
            )))
        })
    }

    /// The estimate of the text fed so far (0 for none).
    fn estimate(slf: &Bound<'_, Self>) -> PyResult<u64> {
        let py = slf.py();
        shield(py, "TextEstimator.estimate", || {
            Ok(shared(slf, ESTIMATOR)?.estimator.estimate())
        })
    }
}

/// Adds the token functions and classes to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(estimate_tokens, module)?)?;
    module.add_function(wrap_pyfunction!(estimate_request, module)?)?;
    module.add_function(wrap_pyfunction!(count_tokens, module)?)?;
    module.add_function(wrap_pyfunction!(has_exact_counting, module)?)?;
    module.add_class::<PyContextBudget>()?;
    module.add_class::<PyContextTracker>()?;
    module.add_class::<PyTextEstimator>()?;
    Ok(())
}
