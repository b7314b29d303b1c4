//! Integer arguments that must not be negative. They are taken as `i128` and checked here, so a
//! negative value is a `ValueError` and one past the native type (a `u64` count, a `u32`) an
//! `OverflowError`, each naming the argument. Taken as an unsigned type, pyo3 would raise
//! `OverflowError: can't convert negative int to unsigned` without saying which; taken as `i64`,
//! `Python int too large to convert to C long`, and refuse 2**63 .. 2**64 - 1, which the `u64`
//! counts hold (and Node takes).

use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyString};

/// `value` as a `T`, or a `ValueError` naming `name` when it is negative (an `OverflowError`
/// when `T` cannot hold it).
pub(crate) fn non_negative<T: TryFrom<i128>>(name: &str, value: i128) -> PyResult<T> {
    if value < 0 {
        return Err(PyValueError::new_err(format!(
            "{name} must not be negative, got {value}"
        )));
    }
    T::try_from(value)
        .map_err(|_| PyOverflowError::new_err(format!("{name} is too large: {value}")))
}

/// [`non_negative`] for an optional argument.
pub(crate) fn non_negative_opt<T: TryFrom<i128>>(
    name: &str,
    value: Option<i128>,
) -> PyResult<Option<T>> {
    value.map(|v| non_negative(name, v)).transpose()
}

/// A count where "more than there is" means "all": `value` as a `u64`, `u64::MAX` for an `int`
/// of any size past 64 bits, or a `ValueError` naming `name` when it is negative (a `bool` is
/// refused, see [`refuse_bool`]). Taken as an object rather than `i128`, so that an `int` past
/// 128 bits saturates too instead of raising pyo3's `OverflowError`.
pub(crate) fn saturating_count(name: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
    refuse_bool(name, "an int", value)?;
    let value = match value.extract::<i128>() {
        Ok(value) => value,
        Err(error) if error.is_instance_of::<PyOverflowError>(value.py()) => {
            if value.lt(0)? {
                return Err(PyValueError::new_err(format!(
                    "{name} must not be negative, got {value}"
                )));
            }
            return Ok(u64::MAX);
        }
        Err(error) => return Err(naming(name, "an int", value, error)),
    };
    if value < 0 {
        return non_negative(name, value);
    }
    Ok(u64::try_from(value).unwrap_or(u64::MAX))
}

/// [`saturating_count`] as a `usize` (a message count or index).
pub(crate) fn saturating_len(name: &str, value: &Bound<'_, PyAny>) -> PyResult<usize> {
    saturating_count(name, value).map(|count| usize::try_from(count).unwrap_or(usize::MAX))
}

/// A `TypeError` naming the argument `name` and the type of `value`, in place of `error` when
/// it is one: pyo3's extraction said only "'str' object cannot be interpreted as an integer"
/// (the argument's name is in a note of the exception, which `str(error)` leaves out, and which
/// Pythons before 3.11 do not have).
fn naming(name: &str, what: &str, value: &Bound<'_, PyAny>, error: PyErr) -> PyErr {
    if !error.is_instance_of::<PyTypeError>(value.py()) {
        return error;
    }
    let kind = type_name(value);
    PyTypeError::new_err(format!("{name} must be {what}, not {kind}"))
}

/// The name of `value`'s type, for messages (`object` when it cannot be read).
pub(crate) fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "object".to_owned(), |name| name.to_string())
}

/// A `TypeError` naming `name` when `value` is a `bool`, which Python takes as an `int` (a
/// subclass of it): `max_retries=True` was 1, where Node refuses `true`. Such a value is a
/// keyword given the wrong value, not a count.
pub(crate) fn refuse_bool(name: &str, what: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
    if value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{name} must be {what}, not bool"
        )));
    }
    Ok(())
}

/// An `int` argument (anything with `__index__`, as pyo3 takes it, but a `bool`): a
/// `TypeError` naming it otherwise.
pub(crate) fn int_arg(name: &str, value: &Bound<'_, PyAny>) -> PyResult<i128> {
    refuse_bool(name, "an int", value)?;
    value
        .extract::<i128>()
        .map_err(|error| naming(name, "an int", value, error))
}

/// [`int_arg`] for an optional argument (`None` is absent).
pub(crate) fn int_arg_opt(name: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<i128>> {
    value.map(|value| int_arg(name, value)).transpose()
}

/// A count argument: an `int` (a `TypeError` naming `name` otherwise) that is not negative
/// and fits `T` (see [`non_negative`]).
pub(crate) fn count_arg<T: TryFrom<i128>>(name: &str, value: &Bound<'_, PyAny>) -> PyResult<T> {
    non_negative(name, int_arg(name, value)?)
}

/// [`count_arg`] for an optional argument (`None` is absent).
pub(crate) fn count_arg_opt<T: TryFrom<i128>>(
    name: &str,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<T>> {
    value.map(|value| count_arg(name, value)).transpose()
}

/// A `str` argument: a `TypeError` naming it otherwise (pyo3's conversion said "'int' object is
/// not an instance of 'str'", the argument's name only in a note of the exception).
pub(crate) fn str_arg(name: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    let text = value.cast::<PyString>().map_err(|_| {
        PyTypeError::new_err(format!("{name} must be a str, not {}", type_name(value)))
    })?;
    // A lone surrogate is pyo3's `UnicodeEncodeError`, as it was.
    Ok(text.to_cow()?.into_owned())
}

/// [`str_arg`] for an optional argument (`None` is absent).
pub(crate) fn str_arg_opt(
    name: &str,
    value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Option<String>> {
    value.map(|value| str_arg(name, value)).transpose()
}

/// An optional `bool` argument (`None` is absent; what pyo3 takes as a `bool`): a `TypeError`
/// naming it otherwise.
pub(crate) fn bool_arg_opt(name: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<bool>> {
    value
        .map(|value| {
            value
                .extract::<bool>()
                .map_err(|error| naming(name, "a bool", value, error))
        })
        .transpose()
}

/// A number argument (a `float`, an `int`, anything with `__float__`, as pyo3 takes it): a
/// `TypeError` naming it otherwise ("must be real number, not str" named nothing).
pub(crate) fn float_arg(name: &str, value: &Bound<'_, PyAny>) -> PyResult<f64> {
    value
        .extract::<f64>()
        .map_err(|error| naming(name, "a number", value, error))
}

/// [`float_arg`] for an optional argument (`None` is absent).
pub(crate) fn float_arg_opt(name: &str, value: Option<&Bound<'_, PyAny>>) -> PyResult<Option<f64>> {
    value.map(|value| float_arg(name, value)).transpose()
}

/// A float as Python writes it (`repr`): `1e+300`, `1e-300`, `nan`, where Rust's `{}` wrote
/// 301 digits for `1e300`, 300 zeros for `1e-300`, and `NaN`.
pub(crate) fn float_text(value: f64) -> String {
    Python::attach(|py| {
        PyFloat::new(py, value)
            .repr()
            .map_or_else(|_| format!("{value:?}"), |repr| repr.to_string())
    })
}
