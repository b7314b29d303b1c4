//! JSON values to and from Python objects, on the executor's per-call path.
//!
//! `pythonize` handles any serde type, but going through serde costs per object: depythonizing
//! probes every dict for dataclass fields (an attribute lookup that raises), which made a
//! one-key input dict cost ~7,000 instructions. The exact built-in types (`dict` with `str`
//! keys, `list`, `tuple`, `str`, `int`, `float`, `bool`, `None`) convert here directly; anything
//! else (subclasses, dataclasses, big integers, non-`str` keys) goes through `pythonize` as before,
//! so the results are the same.

use std::borrow::Cow;
use std::fmt;

use pyo3::prelude::*;
use pyo3::types::{
    PyBool, PyByteArray, PyBytes, PyDict, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple,
};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// How deeply a value may nest lists and dicts (a deeper one is an error, not a stack
/// overflow): the core's limit for every binding, serde_json's, which Node's and C's JSON text
/// is read with. It was 512 here, so a tool result Python sent could not be read elsewhere.
pub(crate) const MAX_DEPTH: usize = ferroloop::json_text::MAX_NESTING;

/// How a `str` holding a lone surrogate (which UTF-8 cannot) converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Surrogates {
    /// Refused: the value is sent somewhere (a tool, a provider) that must get what was given.
    Refuse,
    /// Each becomes U+FFFD: the value is only counted (token estimates), as a plain `str` and
    /// Node's objects are.
    Replace,
}

/// How a float JSON cannot hold (`nan`, `inf`, `-inf`) converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NonFinite {
    /// Refused: the value is sent to a provider, which would get `null` where the caller wrote a
    /// number (a `temperature=nan` silently became "no temperature").
    Refuse,
    /// Becomes `null`, as serde_json writes it: a tool's result or progress (documented: the
    /// model reads the rendering) and values that are only counted.
    Null,
}

/// How an `int` beyond 64 bits (which a `serde_json` number cannot hold) converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BigInts {
    /// Refused: the value is sent, and a rounded number must never be sent in its place.
    Refuse,
    /// Becomes the nearest float (the decimal text when even a float overflows): the value is
    /// only counted, and a JSON parser (the CLI's, C's, Node's) reads such a literal as that
    /// float too, so every binding counts the same.
    Float,
}

/// How [`to_value_at`] converts what JSON has no form for.
#[derive(Debug, Clone, Copy)]
struct Mode {
    surrogates: Surrogates,
    non_finite: NonFinite,
    big_ints: BigInts,
}

/// A Python object as JSON (see the module docs), or why it cannot be converted: what is sent
/// to a provider (a request body, `extra`, messages, a tool's schema), so a non-finite float is
/// refused rather than sent as `null`.
pub(crate) fn to_value(obj: &Bound<'_, PyAny>) -> Result<Value, String> {
    to_value_at(
        obj,
        0,
        Mode {
            surrogates: Surrogates::Refuse,
            non_finite: NonFinite::Refuse,
            big_ints: BigInts::Refuse,
        },
    )
}

/// A Python object as JSON, where a non-finite float becomes `null` (serde_json's rendering):
/// a tool's result or progress, a tool input given to the executor. Otherwise as [`to_value`].
pub(crate) fn to_value_nan_as_null(obj: &Bound<'_, PyAny>) -> Result<Value, String> {
    to_value_at(
        obj,
        0,
        Mode {
            surrogates: Surrogates::Refuse,
            non_finite: NonFinite::Null,
            big_ints: BigInts::Refuse,
        },
    )
}

/// A Python object as JSON, to be counted: as [`to_value`], but a lone surrogate in an exact
/// `str` (a value or a key) becomes U+FFFD instead of an error (see [`lossy_text`]), a
/// non-finite float `null` (counted as absent, not refused: nothing is sent) and an `int`
/// beyond 64 bits its nearest float (see [`BigInts::Float`]).
pub(crate) fn to_value_for_counting(obj: &Bound<'_, PyAny>) -> Result<Value, String> {
    to_value_at(
        obj,
        0,
        Mode {
            surrogates: Surrogates::Replace,
            non_finite: NonFinite::Null,
            big_ints: BigInts::Float,
        },
    )
}

/// `value` as a JSON number, or under `non_finite` when it has none.
fn float_value(value: f64, non_finite: NonFinite) -> Result<Value, String> {
    match (Number::from_f64(value), non_finite) {
        (Some(number), _) => Ok(Value::Number(number)),
        (None, NonFinite::Null) => Ok(Value::Null),
        (None, NonFinite::Refuse) => {
            // Spelled as Python writes it (`nan`, `inf`, `-inf`), not as Rust does (`NaN`).
            let spelled = if value.is_nan() {
                "nan"
            } else if value > 0.0 {
                "inf"
            } else {
                "-inf"
            };
            Err(format!(
                "the float {spelled} has no JSON form (JSON numbers are finite)"
            ))
        }
    }
}

/// The text of a `str`: as it is, or, when it holds a lone surrogate (a `surrogateescape`-decoded
/// name, a JSON `"\ud800"` escape), with U+FFFD in place of each one, as a JavaScript string
/// crosses into Node. Its code units are read as UTF-16 (as JavaScript reads them): surrogates
/// that make a pair are its character.
pub(crate) fn lossy_text<'a>(text: &'a Bound<'_, PyString>) -> PyResult<Cow<'a, str>> {
    if let Ok(text) = text.to_cow() {
        return Ok(text);
    }
    let units = text.call_method1(
        pyo3::intern!(text.py(), "encode"),
        ("utf-16-le", "surrogatepass"),
    )?;
    let units = units.cast::<PyBytes>()?.as_bytes();
    let units: Vec<u16> = units
        .chunks_exact(2)
        .map(|unit| u16::from_le_bytes([unit[0], unit[1]]))
        .collect();
    Ok(Cow::Owned(String::from_utf16_lossy(&units)))
}

/// The text of an exact `str` under `surrogates`.
fn text_with<'a>(text: &'a Bound<'_, PyString>, surrogates: Surrogates) -> PyResult<Cow<'a, str>> {
    match surrogates {
        Surrogates::Refuse => text.to_cow(),
        Surrogates::Replace => lossy_text(text),
    }
}

/// An error when a list or dict inside `depth` others would nest deeper than [`MAX_DEPTH`]
/// (counted as serde_json counts: containers, not the values in the innermost one).
fn too_deep(depth: usize) -> Result<(), String> {
    if depth >= MAX_DEPTH {
        return Err(format!(
            "the value is nested more than {MAX_DEPTH} levels deep"
        ));
    }
    Ok(())
}

fn to_value_at(obj: &Bound<'_, PyAny>, depth: usize, mode: Mode) -> Result<Value, String> {
    let surrogates = mode.surrogates;
    if let Ok(text) = obj.cast_exact::<PyString>() {
        return text_with(text, surrogates)
            .map(|s| Value::String(s.into_owned()))
            .map_err(|err| format!("the value is not valid text: {err}"));
    }
    if let Ok(dict) = obj.cast_exact::<PyDict>() {
        too_deep(depth)?;
        let mut map = Map::new();
        for (key, item) in dict.iter() {
            let Ok(key) = key.cast_exact::<PyString>() else {
                if key.is_instance_of::<PyString>() {
                    // A `str` subclass (a `StrEnum`): serde reads its text.
                    return slow(obj, depth, mode);
                }
                return Err(non_str_key(&key));
            };
            let key = text_with(key, surrogates)
                .map_err(|err| format!("a key is not valid text: {err}"))?;
            map.insert(key.into_owned(), to_value_at(&item, depth + 1, mode)?);
        }
        return Ok(Value::Object(map));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(flag) = obj.cast_exact::<PyBool>() {
        return Ok(Value::Bool(flag.is_true()));
    }
    if obj.is_exact_instance_of::<PyInt>() {
        if let Ok(int) = obj.extract::<i64>() {
            return Ok(Value::Number(int.into()));
        }
        if let Ok(int) = obj.extract::<u64>() {
            return Ok(Value::Number(int.into()));
        }
        if mode.big_ints == BigInts::Float {
            return Ok(big_int_for_counting(obj));
        }
        return slow(obj, depth, mode);
    }
    if let Ok(float) = obj.cast_exact::<PyFloat>() {
        return float_value(float.value(), mode.non_finite);
    }
    if let Ok(list) = obj.cast_exact::<PyList>() {
        too_deep(depth)?;
        return list
            .iter()
            .map(|item| to_value_at(&item, depth + 1, mode))
            .collect::<Result<_, _>>()
            .map(Value::Array);
    }
    if let Ok(tuple) = obj.cast_exact::<PyTuple>() {
        too_deep(depth)?;
        return tuple
            .iter()
            .map(|item| to_value_at(&item, depth + 1, mode))
            .collect::<Result<_, _>>()
            .map(Value::Array);
    }
    if obj.is_instance_of::<PyBytes>()
        || obj.is_instance_of::<PyByteArray>()
        || obj.is_instance_of::<PyMemoryView>()
    {
        // serde said "invalid type: byte array" for `bytes`, "'bytearray' object is not an
        // instance of 'bytes'" for a `bytearray` (as if `bytes` were taken), and made a
        // `memoryview` a list of its byte values.
        let kind = crate::args::type_name(obj);
        return Err(format!(
            "a {kind} value has no JSON form (decode it to a str, or write it as base64 text)"
        ));
    }
    slow(obj, depth, mode)
}

/// The error of a dict key that is no `str`: serde's said only "'int' object is not an
/// instance of 'str'", naming neither the key nor that it was one. A key is refused rather than
/// written as its text (as `json.dumps` writes `1` as `"1"`): `{1: .., "1": ..}` would then
/// give one key twice, and a tool would get a different dict than it was given.
fn non_str_key(key: &Bound<'_, PyAny>) -> String {
    let kind = crate::args::type_name(key);
    let shown = key
        .repr()
        .map_or_else(|_| String::new(), |repr| repr.to_string());
    key_error(&kind, Some(&shown))
}

/// The error of a dict key of type `kind`, shown as `shown` (its `repr`) when known.
fn key_error(kind: &str, shown: Option<&str>) -> String {
    let what = match shown {
        Some(shown) if shown.chars().count() > 60 => {
            format!(
                "the {kind} {}...",
                shown.chars().take(57).collect::<String>()
            )
        }
        Some(shown) => format!("the {kind} {shown}"),
        None => format!("a {kind}"),
    };
    format!("a dict key must be a str (JSON object keys are text), got {what}")
}

/// An `int` beyond 64 bits, to be counted: its nearest float, as a JSON parser reads the
/// literal; its decimal text when even a float overflows (`10**400`), rather than an error.
fn big_int_for_counting(obj: &Bound<'_, PyAny>) -> Value {
    if let Ok(float) = obj.extract::<f64>()
        && let Some(number) = Number::from_f64(float)
    {
        return Value::Number(number);
    }
    obj.str()
        .map_or(Value::Null, |text| Value::String(text.to_string()))
}

/// Any other object, through serde, still at nesting `depth`.
///
/// `depythonize::<Value>` would recurse without a bound: a deeply nested `OrderedDict`, dict
/// subclass, set of frozensets or mapping overflowed the thread's stack (a segfault). The value
/// is built by [`Nested`] instead, which counts the levels as the fast path does.
fn slow(obj: &Bound<'_, PyAny>, depth: usize, mode: Mode) -> Result<Value, String> {
    let mut depythonizer = pythonize::Depythonizer::from_object(obj);
    Nested {
        depth,
        non_finite: mode.non_finite,
        big_ints: mode.big_ints,
    }
    .deserialize(&mut depythonizer)
    .map_err(|err| err.to_string())
}

/// `serde_json::Value`'s own deserialization (same values, same errors) with a depth limit.
#[derive(Clone, Copy)]
struct Nested {
    depth: usize,
    /// What a non-finite float (a `float` subclass's, say) becomes, as on the fast path.
    non_finite: NonFinite,
    /// What an integer beyond 64 bits (an `int` subclass's) becomes, as on the fast path.
    big_ints: BigInts,
}

impl Nested {
    fn inner<E: de::Error>(self) -> Result<Self, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format!(
                "the value is nested more than {MAX_DEPTH} levels deep"
            )));
        }
        Ok(Self {
            depth: self.depth + 1,
            ..self
        })
    }
}

impl<'de> DeserializeSeed<'de> for Nested {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Nested {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any valid JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Value, E> {
        match Number::deserialize(de::value::I128Deserializer::<E>::new(value)) {
            Ok(number) => Ok(Value::Number(number)),
            Err(_) if self.big_ints == BigInts::Float => {
                float_value(value as f64, self.non_finite).map_err(E::custom)
            }
            Err(error) => Err(error),
        }
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Value, E> {
        match Number::deserialize(de::value::U128Deserializer::<E>::new(value)) {
            Ok(number) => Ok(Value::Number(number)),
            Err(_) if self.big_ints == BigInts::Float => {
                float_value(value as f64, self.non_finite).map_err(E::custom)
            }
            Err(error) => Err(error),
        }
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        float_value(value, self.non_finite).map_err(E::custom)
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<Value, E> {
        Err(E::custom(
            "a bytes value has no JSON form (decode it to a str, or write it as base64 text)",
        ))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let inner = self.inner()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let inner = self.inner()?;
        let mut object = Map::new();
        while let Some(key) = map.next_key_seed(Key)? {
            let value = map.next_value_seed(inner)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

/// A dict key read through serde: a `str`, or the error naming what it is instead.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = String;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a str key")
    }

    fn visit_str<E>(self, value: &str) -> Result<String, E> {
        Ok(value.to_owned())
    }

    fn visit_string<E>(self, value: String) -> Result<String, E> {
        Ok(value)
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<String, E> {
        Err(E::custom(key_error(
            "bool",
            Some(if value { "True" } else { "False" }),
        )))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<String, E> {
        Err(E::custom(key_error("int", Some(&value.to_string()))))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<String, E> {
        Err(E::custom(key_error("int", Some(&value.to_string()))))
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<String, E> {
        Err(E::custom(key_error("int", Some(&value.to_string()))))
    }

    fn visit_u128<E: de::Error>(self, value: u128) -> Result<String, E> {
        Err(E::custom(key_error("int", Some(&value.to_string()))))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<String, E> {
        Err(E::custom(key_error(
            "float",
            Some(&crate::args::float_text(value)),
        )))
    }

    fn visit_none<E: de::Error>(self) -> Result<String, E> {
        Err(E::custom(key_error("NoneType", Some("None"))))
    }

    fn visit_unit<E: de::Error>(self) -> Result<String, E> {
        Err(E::custom(key_error("NoneType", Some("None"))))
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<String, E> {
        Err(E::custom(key_error("bytes", None)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<String, A::Error> {
        Err(de::Error::custom(key_error("tuple", None)))
    }
}

/// A JSON value as Python objects (`dict`, `list`, `str`, `int`, `float`, `bool`, `None`): the
/// same objects `pythonize` builds, without serde in between.
pub(crate) fn to_py<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match value {
        Value::Null => py.None().into_bound(py),
        Value::Bool(flag) => PyBool::new(py, *flag).to_owned().into_any(),
        Value::Number(number) => {
            if let Some(int) = number.as_i64() {
                int.into_pyobject(py)?.into_any()
            } else if let Some(int) = number.as_u64() {
                int.into_pyobject(py)?.into_any()
            } else {
                number
                    .as_f64()
                    .unwrap_or(f64::NAN)
                    .into_pyobject(py)?
                    .into_any()
            }
        }
        Value::String(text) => PyString::new(py, text).into_any(),
        Value::Array(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(to_py(py, item)?)?;
            }
            list.into_any()
        }
        Value::Object(map) => {
            let dict = PyDict::new(py);
            for (key, item) in map {
                dict.set_item(key, to_py(py, item)?)?;
            }
            dict.into_any()
        }
    })
}
