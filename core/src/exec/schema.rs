//! Tool input validation against the common subset of JSON Schema that tool definitions use:
//! `type` (a name or a list; `integer` means a number without a fraction), `required`,
//! `properties`, `additionalProperties` (boolean or schema), `items` (one schema, or an array
//! of them checking the leading positions of a tuple), `prefixItems` (then `items` checks the
//! rest), `enum` and `const` (numbers compared by value: `1.0` matches `1`), boolean schemas,
//! and the bounds: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (a number, or
//! draft-04's boolean beside `minimum`/`maximum`), `multipleOf`, `minLength` and `maxLength`
//! (in characters, i.e. code points), `minItems`, `maxItems`, `uniqueItems`, `minProperties` and
//! `maxProperties`. Other keywords (`description`, `pattern`, `format`, `$ref`, `anyOf`, `oneOf`,
//! `allOf`, `not`, `if`, `dependentRequired`, …) are accepted and ignored: the model's input is
//! checked for its shape and bounds, not for every constraint a schema can state.
//!
//! Schemas are compiled once when a tool is registered; validation walks the input once.

use std::fmt::{self, Write as _};

use std::cmp::Ordering;

use serde_json::{Map, Number, Value};

/// At most this many problems are reported for one input.
const MAX_REPORTED: usize = 5;

/// A schema that cannot be compiled (a supported keyword with an ill-formed value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid input schema at {path}: {problem}")]
pub struct SchemaError {
    /// Where in the schema, as a JSON pointer.
    pub path: String,
    /// What is wrong.
    pub problem: String,
}

/// One way an input fails its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Where in the input (`input`, `input.path`, `input.files[2]`).
    pub path: String,
    /// What is wrong, for the model to read.
    pub problem: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.problem)
    }
}

/// A compiled input schema.
#[derive(Debug, Clone, PartialEq)]
pub struct InputSchema {
    root: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    /// Accepts anything (`true`, `{}`).
    Any,
    /// Accepts nothing (`false`).
    Never,
    Checks(Box<Checks>),
}

#[derive(Debug, Clone, PartialEq, Default)]
struct Checks {
    types: Option<TypeSet>,
    allowed: Option<Vec<Value>>,
    constant: Option<Value>,
    required: Vec<String>,
    properties: Vec<(String, Node)>,
    additional: Option<Node>,
    items: Option<Node>,
    /// `items` as an array (draft-07) or `prefixItems` (2020-12): the schema of each leading
    /// position of a tuple.
    tuple: Vec<Node>,
    /// The first position `items` applies to: 0, or past the `prefixItems` (in 2020-12, `items`
    /// is the schema of the rest of the tuple).
    items_from: usize,
    /// The size and range keywords; boxed, as most schemas have none.
    bounds: Option<Box<Bounds>>,
}

/// The bound keywords of one schema. Each applies only to values of its kind (a `minimum` to
/// numbers, a `maxLength` to strings, ...), as JSON Schema says.
#[derive(Debug, Clone, PartialEq, Default)]
struct Bounds {
    /// `minimum` and `exclusiveMinimum` (the larger bound, and whether it is exclusive).
    lower: Option<(Number, bool)>,
    /// `maximum` and `exclusiveMaximum`.
    upper: Option<(Number, bool)>,
    /// Above 0 (checked when compiled).
    multiple_of: Option<Number>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    unique_items: bool,
    min_properties: Option<u64>,
    max_properties: Option<u64>,
}

/// A set of JSON types as bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TypeSet(u8);

const TYPE_NAMES: [&str; 7] = [
    "null", "boolean", "object", "array", "number", "string", "integer",
];

impl TypeSet {
    fn parse(name: &str) -> Option<Self> {
        TYPE_NAMES
            .iter()
            .position(|candidate| *candidate == name)
            .map(|bit| Self(1 << bit))
    }

    fn accepts(self, value: &Value) -> bool {
        let bit = |name: &str| Self::parse(name).map_or(0, |set| set.0);
        let kind = match value {
            Value::Null => bit("null"),
            Value::Bool(_) => bit("boolean"),
            Value::Object(_) => bit("object"),
            Value::Array(_) => bit("array"),
            Value::String(_) => bit("string"),
            Value::Number(number) => {
                let integral = number.is_i64()
                    || number.is_u64()
                    || number.as_f64().is_some_and(|f| f.fract() == 0.0);
                bit("number") | if integral { bit("integer") } else { 0 }
            }
        };
        self.0 & kind != 0
    }

    fn describe(self) -> String {
        let names: Vec<&str> = TYPE_NAMES
            .iter()
            .enumerate()
            .filter(|(bit, _)| self.0 & (1 << bit) != 0)
            .map(|(_, name)| *name)
            .collect();
        names.join(" or ")
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
    }
}

impl InputSchema {
    /// A schema accepting any input.
    pub fn any() -> Self {
        Self { root: Node::Any }
    }

    /// Compiles a JSON schema.
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        Ok(Self {
            root: compile_node(schema, &mut String::new())?,
        })
    }

    /// Checks `input`; on failure, returns the first few violations (never empty).
    pub fn validate(&self, input: &Value) -> Result<(), Vec<Violation>> {
        // The common case (valid input) takes a walk that builds no paths and allocates nothing;
        // only a failing input is walked again to describe where and why.
        if conforms(&self.root, input) {
            return Ok(());
        }
        let mut violations = Vec::new();
        let mut path = String::from("input");
        check(&self.root, input, &mut path, &mut violations);
        if violations.is_empty() {
            Ok(())
        } else {
            Err(violations)
        }
    }
}

fn schema_error(path: &str, problem: &str) -> SchemaError {
    SchemaError {
        path: if path.is_empty() {
            "/".to_owned()
        } else {
            path.to_owned()
        },
        problem: problem.to_owned(),
    }
}

fn compile_node(schema: &Value, path: &mut String) -> Result<Node, SchemaError> {
    let object = match schema {
        Value::Bool(true) => return Ok(Node::Any),
        Value::Bool(false) => return Ok(Node::Never),
        Value::Object(object) => object,
        _ => {
            return Err(schema_error(
                path,
                "a schema must be an object or a boolean",
            ));
        }
    };
    let mut checks = Checks {
        types: compile_types(object, path)?,
        ..Checks::default()
    };
    if let Some(allowed) = object.get("enum") {
        let Value::Array(values) = allowed else {
            return Err(schema_error(path, "`enum` must be an array"));
        };
        checks.allowed = Some(values.clone());
    }
    checks.constant = object.get("const").cloned();
    if let Some(required) = object.get("required") {
        let names = required.as_array().and_then(|names| {
            names
                .iter()
                .map(|name| name.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
        });
        checks.required =
            names.ok_or_else(|| schema_error(path, "`required` must be an array of strings"))?;
    }
    if let Some(properties) = object.get("properties") {
        let Value::Object(properties) = properties else {
            return Err(schema_error(path, "`properties` must be an object"));
        };
        for (name, sub) in properties {
            let mark = path.len();
            let _ = write!(path, "/properties/{name}");
            checks
                .properties
                .push((name.clone(), compile_node(sub, path)?));
            path.truncate(mark);
        }
    }
    checks.additional = compile_child(object, "additionalProperties", path)?;
    match (object.get("prefixItems"), object.get("items")) {
        (Some(prefix), _) => {
            checks.tuple = compile_positions(prefix, "prefixItems", path)?;
            checks.items_from = checks.tuple.len();
            checks.items = compile_child(object, "items", path)?;
        }
        (None, Some(positions @ Value::Array(_))) => {
            checks.tuple = compile_positions(positions, "items", path)?;
        }
        (None, _) => checks.items = compile_child(object, "items", path)?,
    }
    checks.bounds = compile_bounds(object, path)?.map(Box::new);
    let trivial = checks == Checks::default();
    Ok(if trivial {
        Node::Any
    } else {
        Node::Checks(Box::new(checks))
    })
}

fn compile_types(object: &Map<String, Value>, path: &str) -> Result<Option<TypeSet>, SchemaError> {
    let unknown = |name: &str| schema_error(path, &format!("unknown type `{name}`"));
    match object.get("type") {
        None => Ok(None),
        Some(Value::String(name)) => TypeSet::parse(name).map(Some).ok_or_else(|| unknown(name)),
        Some(Value::Array(names)) => {
            let mut set = TypeSet(0);
            for name in names {
                let name = name
                    .as_str()
                    .ok_or_else(|| schema_error(path, "`type` entries must be strings"))?;
                set.0 |= TypeSet::parse(name).ok_or_else(|| unknown(name))?.0;
            }
            Ok(Some(set))
        }
        Some(_) => Err(schema_error(path, "`type` must be a string or an array")),
    }
}

/// The bound keywords of `object`, or `None` when it has none.
fn compile_bounds(object: &Map<String, Value>, path: &str) -> Result<Option<Bounds>, SchemaError> {
    let number = |keyword: &str| -> Result<Option<Number>, SchemaError> {
        match object.get(keyword) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(Some(n.clone())),
            Some(_) => Err(schema_error(path, &format!("`{keyword}` must be a number"))),
        }
    };
    let count = |keyword: &str| -> Result<Option<u64>, SchemaError> {
        let Some(value) = object.get(keyword) else {
            return Ok(None);
        };
        // `2.0` is an integer in JSON Schema.
        let whole = || value.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0);
        value
            .as_u64()
            .or_else(|| whole().map(|f| f as u64))
            .map(Some)
            .ok_or_else(|| {
                schema_error(path, &format!("`{keyword}` must be a non-negative integer"))
            })
    };
    // `exclusiveMinimum` is a number (draft-06 on) or, in draft-04, a boolean that makes
    // `minimum` exclusive.
    let bound = |inclusive: &str, exclusive: &str, lower: bool| {
        let mut bound = number(inclusive)?.map(|value| (value, false));
        match object.get(exclusive) {
            None => {}
            Some(Value::Bool(flag)) => {
                if let Some((_, strict)) = &mut bound {
                    *strict = *flag;
                }
            }
            Some(Value::Number(n)) => {
                // Both given: the tighter one applies.
                let tighter = match &bound {
                    None => true,
                    Some((current, _)) => {
                        let order = compare(n, current);
                        if lower { order.is_ge() } else { order.is_le() }
                    }
                };
                if tighter {
                    bound = Some((n.clone(), true));
                }
            }
            Some(_) => {
                return Err(schema_error(
                    path,
                    &format!("`{exclusive}` must be a number or a boolean"),
                ));
            }
        }
        Ok(bound)
    };
    let multiple_of = number("multipleOf")?;
    if multiple_of
        .as_ref()
        .is_some_and(|m| m.as_f64().is_none_or(|m| m.is_nan() || m <= 0.0))
    {
        return Err(schema_error(path, "`multipleOf` must be above 0"));
    }
    let unique_items = match object.get("uniqueItems") {
        None => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => return Err(schema_error(path, "`uniqueItems` must be a boolean")),
    };
    let bounds = Bounds {
        lower: bound("minimum", "exclusiveMinimum", true)?,
        upper: bound("maximum", "exclusiveMaximum", false)?,
        multiple_of,
        min_length: count("minLength")?,
        max_length: count("maxLength")?,
        min_items: count("minItems")?,
        max_items: count("maxItems")?,
        unique_items,
        min_properties: count("minProperties")?,
        max_properties: count("maxProperties")?,
    };
    Ok((bounds != Bounds::default()).then_some(bounds))
}

/// The first bound `value` breaks, described for the model (`None` when it keeps them all).
fn broken_bound(bounds: &Bounds, value: &Value) -> Option<String> {
    let size = |what: [&str; 2], n: usize, min: Option<u64>, max: Option<u64>| {
        let n = n as u64;
        let noun = |k: u64| if k == 1 { what[0] } else { what[1] };
        if let Some(min) = min.filter(|&min| n < min) {
            return Some(format!("must have at least {min} {}, got {n}", noun(min)));
        }
        if let Some(max) = max.filter(|&max| n > max) {
            return Some(format!("must have at most {max} {}, got {n}", noun(max)));
        }
        None
    };
    match value {
        Value::Number(number) => {
            if let Some((min, strict)) = &bounds.lower {
                let order = compare(number, min);
                if order.is_lt() || (*strict && order.is_eq()) {
                    let rule = if *strict { "above" } else { "at least" };
                    return Some(format!("must be {rule} {min}, got {number}"));
                }
            }
            if let Some((max, strict)) = &bounds.upper {
                let order = compare(number, max);
                if order.is_gt() || (*strict && order.is_eq()) {
                    let rule = if *strict { "below" } else { "at most" };
                    return Some(format!("must be {rule} {max}, got {number}"));
                }
            }
            if let Some(step) = &bounds.multiple_of
                && !is_multiple(number, step)
            {
                return Some(format!("must be a multiple of {step}, got {number}"));
            }
            None
        }
        Value::String(text) => {
            // Only counted when a length bound asks (a scan of the string).
            if bounds.min_length.is_none() && bounds.max_length.is_none() {
                return None;
            }
            let length = text.chars().count();
            size(
                ["character", "characters"],
                length,
                bounds.min_length,
                bounds.max_length,
            )
        }
        Value::Array(items) => {
            let counts = (bounds.min_items, bounds.max_items);
            if let Some(problem) = size(["item", "items"], items.len(), counts.0, counts.1) {
                return Some(problem);
            }
            if bounds.unique_items {
                // Quadratic in the items, as `enum` is in its members; inputs are small.
                for (j, item) in items.iter().enumerate() {
                    if let Some(i) = items[..j]
                        .iter()
                        .position(|earlier| json_equal(earlier, item))
                    {
                        return Some(format!(
                            "must not repeat items: items {i} and {j} are equal"
                        ));
                    }
                }
            }
            None
        }
        Value::Object(object) => size(
            ["property", "properties"],
            object.len(),
            bounds.min_properties,
            bounds.max_properties,
        ),
        _ => None,
    }
}

/// An integer JSON number as an `i128` (every `i64` and `u64`); `None` for a fraction.
fn integer(number: &Number) -> Option<i128> {
    number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from))
}

/// JSON Schema's order of two numbers: exactly when both are integers (beyond 2^53 an `f64`
/// would merge neighbours, as for `enum`), else by value as `f64`s.
fn compare(a: &Number, b: &Number) -> Ordering {
    match (integer(a), integer(b)) {
        (Some(a), Some(b)) => a.cmp(&b),
        _ => {
            let (a, b) = (
                a.as_f64().unwrap_or(f64::NAN),
                b.as_f64().unwrap_or(f64::NAN),
            );
            a.partial_cmp(&b).unwrap_or(Ordering::Equal)
        }
    }
}

/// Whether `number` is a whole multiple of `step` (above 0): exactly when both are integers;
/// else by the remainder from the nearest multiple, which may be only what binary floating
/// point loses (a few units in the last place of the value), so that `0.3` is a multiple of
/// `0.1` (`0.3 / 0.1` is `2.9999999999999996`) while `12345678.905` is not one of `0.01`.
fn is_multiple(number: &Number, step: &Number) -> bool {
    if let (Some(n), Some(step)) = (integer(number), integer(step)) {
        return step != 0 && n % step == 0;
    }
    let (Some(x), Some(step)) = (number.as_f64(), step.as_f64()) else {
        return true;
    };
    let nearest = (x / step).round();
    if !nearest.is_finite() {
        // A value so far past the step that no multiple is representable near it.
        return false;
    }
    (x - step * nearest).abs() <= 2.0 * f64::EPSILON * x.abs()
}

fn compile_child(
    object: &Map<String, Value>,
    keyword: &str,
    path: &mut String,
) -> Result<Option<Node>, SchemaError> {
    let Some(sub) = object.get(keyword) else {
        return Ok(None);
    };
    let mark = path.len();
    let _ = write!(path, "/{keyword}");
    let node = compile_node(sub, path)?;
    path.truncate(mark);
    Ok(Some(node))
}

/// The schemas of a tuple's leading positions (an array under `keyword`).
fn compile_positions(
    positions: &Value,
    keyword: &str,
    path: &mut String,
) -> Result<Vec<Node>, SchemaError> {
    let Value::Array(positions) = positions else {
        return Err(schema_error(path, &format!("`{keyword}` must be an array")));
    };
    let mut nodes = Vec::with_capacity(positions.len());
    for (i, sub) in positions.iter().enumerate() {
        let mark = path.len();
        let _ = write!(path, "/{keyword}/{i}");
        nodes.push(compile_node(sub, path)?);
        path.truncate(mark);
    }
    Ok(nodes)
}

fn report(violations: &mut Vec<Violation>, path: &str, problem: String) {
    if violations.len() < MAX_REPORTED {
        violations.push(Violation {
            path: path.to_owned(),
            problem,
        });
    }
}

/// Whether `value` satisfies `node` (the same rules as [`check`], without reporting).
fn conforms(node: &Node, value: &Value) -> bool {
    let checks = match node {
        Node::Any => return true,
        Node::Never => return false,
        Node::Checks(checks) => checks,
    };
    if checks.types.is_some_and(|types| !types.accepts(value)) {
        return false;
    }
    if checks
        .allowed
        .as_ref()
        .is_some_and(|allowed| !is_member(allowed, value))
    {
        return false;
    }
    if checks
        .constant
        .as_ref()
        .is_some_and(|constant| !json_equal(constant, value))
    {
        return false;
    }
    if checks
        .bounds
        .as_ref()
        .is_some_and(|bounds| broken_bound(bounds, value).is_some())
    {
        return false;
    }
    match value {
        Value::Object(object) => {
            checks.required.iter().all(|name| object.contains_key(name))
                && object.iter().all(|(name, value)| {
                    match checks.properties.iter().find(|(known, _)| known == name) {
                        Some((_, node)) => conforms(node, value),
                        None => checks
                            .additional
                            .as_ref()
                            .is_none_or(|node| conforms(node, value)),
                    }
                })
        }
        Value::Array(items) => {
            checks.items.as_ref().is_none_or(|node| {
                items
                    .iter()
                    .skip(checks.items_from)
                    .all(|item| conforms(node, item))
            }) && checks
                .tuple
                .iter()
                .zip(items)
                .all(|(node, item)| conforms(node, item))
        }
        _ => true,
    }
}

/// Whether `value` is one of `allowed` (JSON Schema equality, see [`json_equal`]).
fn is_member(allowed: &[Value], value: &Value) -> bool {
    allowed.iter().any(|member| json_equal(member, value))
}

/// JSON Schema's equality for `enum` and `const`: numbers are equal when their values are
/// (`1` and `1.0`), where `serde_json` tells an integer from a float; arrays and objects
/// compare member by member.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => compare(x, y).is_eq(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(key, x)| y.get(key).is_some_and(|y| json_equal(x, y)))
        }
        _ => a == b,
    }
}

fn check(node: &Node, value: &Value, path: &mut String, violations: &mut Vec<Violation>) {
    let checks = match node {
        Node::Any => return,
        Node::Never => return report(violations, path, "no value is allowed here".to_owned()),
        Node::Checks(checks) => checks,
    };
    if let Some(types) = checks.types
        && !types.accepts(value)
    {
        let problem = format!("expected {}, got {}", types.describe(), type_name(value));
        return report(violations, path, problem);
    }
    if let Some(allowed) = &checks.allowed
        && !is_member(allowed, value)
    {
        let list = Value::Array(allowed.clone());
        report(violations, path, format!("must be one of {list}"));
    }
    if let Some(constant) = &checks.constant
        && !json_equal(constant, value)
    {
        report(violations, path, format!("must be {constant}"));
    }
    if let Some(problem) = checks
        .bounds
        .as_ref()
        .and_then(|bounds| broken_bound(bounds, value))
    {
        report(violations, path, problem);
    }
    match value {
        Value::Object(object) => check_object(checks, object, path, violations),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let rest = checks.items.iter().filter(|_| i >= checks.items_from);
                let nodes = checks.tuple.get(i).into_iter().chain(rest);
                for node in nodes {
                    let mark = path.len();
                    let _ = write!(path, "[{i}]");
                    check(node, item, path, violations);
                    path.truncate(mark);
                }
            }
        }
        _ => {}
    }
}

fn check_object(
    checks: &Checks,
    object: &Map<String, Value>,
    path: &mut String,
    violations: &mut Vec<Violation>,
) {
    for name in &checks.required {
        if !object.contains_key(name) {
            report(
                violations,
                path,
                format!("missing required property \"{name}\""),
            );
        }
    }
    for (name, value) in object {
        let mark = path.len();
        let _ = write!(path, ".{name}");
        match checks.properties.iter().find(|(known, _)| known == name) {
            Some((_, node)) => check(node, value, path, violations),
            None => match &checks.additional {
                Some(Node::Never) => {
                    path.truncate(mark);
                    report(violations, path, format!("unexpected property \"{name}\""));
                }
                Some(node) => check(node, value, path, violations),
                None => {}
            },
        }
        path.truncate(mark);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(schema: Value, input: Value) -> Vec<String> {
        match InputSchema::compile(&schema).unwrap().validate(&input) {
            Ok(()) => Vec::new(),
            Err(violations) => violations.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn accepts_valid_input() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "ignored keyword"},
                "limit": {"type": "integer", "minimum": 1},
                "mode": {"enum": ["read", "write"]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["path"],
            "additionalProperties": false,
        });
        let input = json!({"path": "a", "limit": 3.0, "mode": "read", "tags": ["x"]});
        assert!(problems(schema, input).is_empty());
    }

    #[test]
    fn reports_paths_and_problems() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer"},
                "mode": {"enum": ["read", "write"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "kind": {"const": "file"},
            },
            "required": ["path", "kind"],
            "additionalProperties": false,
        });
        let input =
            json!({"limit": 1.5, "mode": "x", "tags": ["a", 2], "extra": null, "kind": "dir"});
        assert_eq!(
            problems(schema, input),
            [
                "input: missing required property \"path\"",
                "input.limit: expected integer, got number",
                "input.mode: must be one of [\"read\",\"write\"]",
                "input.tags[1]: expected string, got number",
                "input: unexpected property \"extra\"",
            ]
        );
    }

    #[test]
    fn type_lists_boolean_schemas_and_additional_schemas() {
        assert!(problems(json!({"type": ["string", "null"]}), json!(null)).is_empty());
        assert_eq!(
            problems(json!({"type": ["string", "null"]}), json!(1)),
            ["input: expected null or string, got number"]
        );
        assert!(problems(json!(true), json!({"a": 1})).is_empty());
        assert_eq!(
            problems(json!(false), json!(1)),
            ["input: no value is allowed here"]
        );
        assert_eq!(
            problems(
                json!({"additionalProperties": {"type": "number"}}),
                json!({"a": "x"})
            ),
            ["input.a: expected number, got string"]
        );
        assert_eq!(
            problems(json!({"type": "object"}), json!("text")),
            ["input: expected object, got string"]
        );
    }

    /// JSON Schema compares numbers by value: `1.0` is the enum member `1` (a model, or a
    /// host language with one float type, may well send `1.0`), as `integer` already accepts.
    #[test]
    fn enum_and_const_compare_numbers_by_value() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": {"enum": [1, 2]},
                "m": {"const": 3},
                "big": {"const": 18_446_744_073_709_551_615_u64},
                "nested": {"enum": [[1, {"a": 2}]]},
            },
        });
        let input = json!({"n": 1.0, "m": 3.0, "nested": [1.0, {"a": 2.0}]});
        assert!(problems(schema.clone(), input).is_empty());
        assert!(problems(schema.clone(), json!({"m": -3})).len() == 1);
        assert_eq!(
            problems(schema.clone(), json!({"n": 1.5, "m": "3"})),
            ["input.n: must be one of [1,2]", "input.m: must be 3"]
        );
        // Integers beyond f64's exact range are compared exactly.
        assert_eq!(
            problems(schema, json!({"big": 18_446_744_073_709_551_614_u64})),
            ["input.big: must be 18446744073709551615"]
        );
    }

    /// `items` as an array (draft-07 tuple validation, what pydantic v1 and zod-to-json-schema
    /// emit for tuples) is a valid schema: it must register, and checks each position.
    #[test]
    fn tuple_items_validate_each_position() {
        let schema = json!({
            "type": "object",
            "properties": {
                "point": {
                    "type": "array",
                    "items": [{"type": "integer"}, {"type": "string"}],
                    "minItems": 2,
                },
            },
        });
        assert!(problems(schema.clone(), json!({"point": [1, "a"]})).is_empty());
        // Items past the tuple are not checked (`additionalItems` is ignored like other keywords).
        assert!(problems(schema.clone(), json!({"point": [1, "a", null]})).is_empty());
        assert_eq!(
            problems(schema, json!({"point": ["a", 1]})),
            [
                "input.point[0]: expected integer, got string",
                "input.point[1]: expected string, got number"
            ]
        );
        let err = InputSchema::compile(&json!({"items": [{"type": 1}]})).unwrap_err();
        assert_eq!(err.path, "/items/0");
        // 2020-12: `prefixItems` checks the leading positions, `items` the rest only.
        let schema = json!({"prefixItems": [{"type": "string"}], "items": {"type": "number"}});
        assert!(problems(schema.clone(), json!(["a", 1, 2.5])).is_empty());
        assert_eq!(
            problems(schema, json!([1, "b"])),
            [
                "input[0]: expected string, got number",
                "input[1]: expected number, got string"
            ]
        );
        let closed = json!({"prefixItems": [{"type": "string"}], "items": false});
        assert!(problems(closed.clone(), json!(["a"])).is_empty());
        assert_eq!(
            problems(closed, json!(["a", "b"])),
            ["input[1]: no value is allowed here"]
        );
    }

    /// The bound keywords tool schemas use (pydantic's `Field(ge=1, max_length=80)`, zod's
    /// `.min(1)`): the C docs said a schema is enforced, and these were ignored.
    #[test]
    fn bounds_are_enforced_on_values_of_their_kind() {
        let schema = json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "ratio": {"exclusiveMinimum": 0, "exclusiveMaximum": 1},
                "old": {"minimum": 0, "exclusiveMinimum": true},
                "step": {"multipleOf": 0.1},
                "even": {"multipleOf": 2},
                "name": {"type": "string", "minLength": 1, "maxLength": 3},
                "tags": {"minItems": 1, "maxItems": 2, "uniqueItems": true},
                "env": {"minProperties": 1, "maxProperties": 1},
            },
            "minProperties": 1,
        });
        let good = json!({
            "n": 10, "ratio": 0.5, "old": 0.1, "step": 0.3, "even": -4, "name": "añb",
            "tags": [1, "1"], "env": {"A": "1"},
        });
        assert!(problems(schema.clone(), good).is_empty());
        assert_eq!(
            problems(
                schema.clone(),
                json!({"n": 0, "ratio": 1, "old": 0, "step": 0.25, "even": 3})
            ),
            [
                "input.n: must be at least 1, got 0",
                "input.ratio: must be below 1, got 1",
                "input.old: must be above 0, got 0",
                "input.step: must be a multiple of 0.1, got 0.25",
                "input.even: must be a multiple of 2, got 3",
            ]
        );
        assert_eq!(
            problems(
                schema.clone(),
                json!({"n": 11.0, "name": "", "tags": [], "env": {"A": "1", "B": "2"}})
            ),
            [
                "input.n: must be at most 10, got 11.0",
                "input.name: must have at least 1 character, got 0",
                "input.tags: must have at least 1 item, got 0",
                "input.env: must have at most 1 property, got 2",
            ]
        );
        assert_eq!(
            problems(schema.clone(), json!({"name": "abcd", "tags": [1, 1.0]})),
            [
                "input.name: must have at most 3 characters, got 4",
                "input.tags: must not repeat items: items 0 and 1 are equal",
            ]
        );
        assert_eq!(
            problems(schema.clone(), json!({})),
            ["input: must have at least 1 property, got 0"]
        );
        // A bound applies only to its kind: a string is no number below 1.
        assert!(problems(schema, json!({"n": "0", "name": 12345})).len() == 2);
        // Draft-06 numbers and a `minimum` beside them: the tighter applies.
        let both = json!({"minimum": 5, "exclusiveMinimum": 3});
        assert!(problems(both.clone(), json!(5)).is_empty());
        assert_eq!(
            problems(both, json!(4)),
            ["input: must be at least 5, got 4"]
        );
    }

    /// Found by an audit of the first version: a relative tolerance let every value pass
    /// `multipleOf` once the quotient passed 5×10⁸, and bounds compared as `f64` merged
    /// integers beyond 2^53.
    #[test]
    fn bounds_hold_for_large_values() {
        for (schema, input) in [
            (json!({"multipleOf": 0.01}), json!(12_345_678.905)),
            (json!({"multipleOf": 0.01}), json!(5_000_000.001)),
            (json!({"multipleOf": 1}), json!(1_000_000_000.5)),
            (json!({"multipleOf": 0.5}), json!(300_000_000.3)),
            (json!({"multipleOf": 1}), json!(1e15 + 0.5)),
            (
                json!({"multipleOf": 9_223_372_036_854_775_807_i64}),
                json!(9_223_372_036_854_775_806_i64),
            ),
            (
                json!({"maximum": 9_007_199_254_740_992_i64}),
                json!(9_007_199_254_740_993_i64),
            ),
            (
                json!({"minimum": -9_007_199_254_740_992_i64}),
                json!(-9_007_199_254_740_993_i64),
            ),
            (
                json!({"exclusiveMaximum": 18_446_744_073_709_551_615_u64}),
                json!(18_446_744_073_709_551_615_u64),
            ),
        ] {
            assert_eq!(
                problems(schema.clone(), input.clone()).len(),
                1,
                "{schema} {input}"
            );
        }
        for (schema, input) in [
            (json!({"multipleOf": 0.01}), json!(12_345_678.9)),
            (json!({"multipleOf": 0.1}), json!(123_456_789.1)),
            (json!({"multipleOf": 0.5}), json!(300_000_000.5)),
            (
                json!({"multipleOf": 7}),
                json!(9_223_372_036_854_775_800_i64),
            ),
            (json!({"multipleOf": 2}), json!(1e20)),
            (
                json!({"maximum": 9_007_199_254_740_993_i64}),
                json!(9_007_199_254_740_993_i64),
            ),
        ] {
            assert!(
                problems(schema.clone(), input.clone()).is_empty(),
                "{schema} {input}"
            );
        }
        assert_eq!(
            problems(json!({"multipleOf": 0.01}), json!(12_345_678.905)),
            ["input: must be a multiple of 0.01, got 12345678.905"]
        );
    }

    #[test]
    fn ill_formed_bounds_are_refused() {
        for (schema, problem) in [
            (json!({"minimum": "1"}), "`minimum` must be a number"),
            (json!({"multipleOf": 0}), "`multipleOf` must be above 0"),
            (json!({"multipleOf": -2}), "`multipleOf` must be above 0"),
            (
                json!({"maxLength": -1}),
                "`maxLength` must be a non-negative integer",
            ),
            (
                json!({"minItems": 1.5}),
                "`minItems` must be a non-negative integer",
            ),
            (
                json!({"uniqueItems": "yes"}),
                "`uniqueItems` must be a boolean",
            ),
            (
                json!({"exclusiveMaximum": "1"}),
                "`exclusiveMaximum` must be a number or a boolean",
            ),
        ] {
            let err = InputSchema::compile(&schema).unwrap_err();
            assert_eq!(err.problem, problem, "{schema}");
        }
        // `2.0` is an integer.
        assert!(InputSchema::compile(&json!({"maxItems": 2.0})).is_ok());
    }

    #[test]
    fn reports_at_most_five_problems() {
        let schema = json!({"type": "array", "items": {"type": "string"}});
        let input = json!([1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(problems(schema, input).len(), MAX_REPORTED);
    }

    #[test]
    fn rejects_ill_formed_schemas() {
        let err = InputSchema::compile(&json!({"type": "strnig"})).unwrap_err();
        assert_eq!(err.path, "/");
        let err =
            InputSchema::compile(&json!({"properties": {"a": {"required": "x"}}})).unwrap_err();
        assert_eq!(err.path, "/properties/a");
        assert!(InputSchema::compile(&json!(3)).is_err());
        assert!(InputSchema::compile(&json!({"items": {"enum": 1}})).is_err());
    }

    fn arbitrary_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-3i64..3).prop_map(|n| json!(n)),
            prop_oneof![Just(0.5f64), Just(2.0f64)].prop_map(|f| json!(f)),
            prop_oneof![Just("read"), Just("x"), Just("")].prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec(
                    (
                        prop_oneof![
                            Just("path"),
                            Just("mode"),
                            Just("tags"),
                            Just("n"),
                            Just("pair"),
                            Just("rest"),
                            Just("bounded")
                        ],
                        inner
                    ),
                    0..4
                )
                .prop_map(|pairs| Value::Object(
                    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
                )),
            ]
        })
    }

    proptest::proptest! {
        /// The allocation-free walk and the reporting walk always agree.
        #[test]
        fn fast_and_reporting_walks_agree(input in arbitrary_json()) {
            let schema = InputSchema::compile(&json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "mode": {"enum": ["read", "write"]},
                    "tags": {"type": "array", "items": {"type": ["string", "null"]}},
                    "n": {"type": "integer", "const": 2},
                    "bounded": {"minimum": -1, "exclusiveMaximum": 2, "multipleOf": 0.5,
                                "minLength": 1, "maxItems": 2, "uniqueItems": true,
                                "maxProperties": 1},
                    "pair": {"items": [{"type": "string"}, {"enum": [2]}]},
                    "rest": {"prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
                },
                "required": ["path"],
                "additionalProperties": false,
            }))
            .unwrap();
            let mut violations = Vec::new();
            check(&schema.root, &input, &mut String::from("input"), &mut violations);
            proptest::prop_assert_eq!(conforms(&schema.root, &input), violations.is_empty());
            proptest::prop_assert_eq!(schema.validate(&input).is_ok(), violations.is_empty());
        }
    }

    #[test]
    fn trivial_schema_compiles_to_any() {
        let schema = InputSchema::compile(&json!({"description": "x"})).unwrap();
        assert_eq!(schema, InputSchema::any());
    }
}
