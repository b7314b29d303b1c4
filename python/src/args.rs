//! Integer arguments that must not be negative. They are taken as `i64` and checked here, so a
//! negative value is a `ValueError` that names the argument. Taken as an unsigned type, pyo3
//! would raise `OverflowError: can't convert negative int to unsigned` without saying which.

use pyo3::exceptions::{PyOverflowError, PyValueError};
use pyo3::prelude::*;

/// `value` as a `T`, or a `ValueError` naming `name` when it is negative.
pub(crate) fn non_negative<T: TryFrom<i64>>(name: &str, value: i64) -> PyResult<T> {
    if value < 0 {
        return Err(PyValueError::new_err(format!(
            "{name} must not be negative, got {value}"
        )));
    }
    T::try_from(value)
        .map_err(|_| PyOverflowError::new_err(format!("{name} is too large: {value}")))
}

/// [`non_negative`] for an optional argument.
pub(crate) fn non_negative_opt<T: TryFrom<i64>>(
    name: &str,
    value: Option<i64>,
) -> PyResult<Option<T>> {
    value.map(|v| non_negative(name, v)).transpose()
}
