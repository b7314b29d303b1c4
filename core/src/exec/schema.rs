//! Tool input validation against the JSON Schema that tool definitions use (what Pydantic,
//! zod-to-json-schema and hand-written MCP schemas emit), compiled once when a tool is
//! registered and walked once per input.
//!
//! Checked keywords:
//! - `type` (a name or a list; `integer` means a number without a fraction), `enum` and `const`
//!   (numbers compared by value: `1.0` matches `1`), and boolean schemas;
//! - objects: `required`, `properties`, `patternProperties`, `additionalProperties` (boolean or
//!   schema; it covers the names neither `properties` nor a `patternProperties` pattern
//!   matches), `propertyNames`, `dependentRequired`, `dependentSchemas`, and draft-07's
//!   `dependencies` (either kind);
//! - arrays: `items` (one schema, or an array of them checking the leading positions of a
//!   tuple, then draft-07's `additionalItems` checks the rest), `prefixItems` (then `items`
//!   checks the rest), `contains` with `minContains` and `maxContains`;
//! - the bounds: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (a number, or
//!   draft-04's boolean beside `minimum`/`maximum`), `multipleOf`, `minLength` and `maxLength`
//!   (in characters, i.e. code points), `minItems`, `maxItems`, `uniqueItems`, `minProperties`
//!   and `maxProperties`;
//! - `pattern`: unanchored, as ECMA-262's `test` is, with ECMA-262's ASCII `\d`, `\w` and `\b`,
//!   its `\s` (white space and line terminators, U+FEFF included), its `\cX` control escapes
//!   and its `.` (which matches no line terminator); run by the `regex-automata` engine, in
//!   time linear in the string. A pattern that engine cannot compile (look-around and
//!   back-references, which it lacks by design, other ECMA-262 syntax it does not share, or a
//!   typo) is ignored with a `tracing` warning when the schema is compiled, so that the tool
//!   still registers: zod's e-mail pattern uses `(?!...)`. Such a
//!   `patternProperties` pattern also keeps `additionalProperties` from refusing the names the
//!   other keywords do not cover, as it may cover them;
//! - the applicators `allOf`, `anyOf`, `oneOf`, `not`, and `if`/`then`/`else`;
//! - `$ref` into the same document: `#` (the whole schema), `#/$defs/Name`,
//!   `#/definitions/Name`, or any JSON pointer (`~0`/`~1` escapes, percent-decoded), also with
//!   the document's own `$id` in front. Inside a subschema with an `$id` of its own (a URI, not
//!   draft-07's `"$id": "#name"`), a fragment names a place in that subschema, as that `$id`
//!   starts a new resource. A `$ref` applies beside its sibling keywords (as in 2019-09 and
//!   later). Each referenced schema is compiled once, so recursive schemas (a tree
//!   type naming itself) are fine. A local `$ref` that resolves to nothing is a
//!   [`SchemaError`] naming it, and so is a cycle of references that never descends into the
//!   input (`{"$ref": "#"}`): it would never end and says nothing. A `$ref` to another document
//!   (`https://…`, `other.json`) or an anchor (`#name`) is not fetched or searched: it is
//!   ignored with a warning, as such schemas registered (unchecked) before; so is one by
//!   another URI naming a subschema's `$id`.
//!
//! Other keywords are accepted and not checked: `format` (an annotation by default in JSON
//! Schema 2020-12), `unevaluatedProperties`, `unevaluatedItems`, `$dynamicRef`,
//! `contentEncoding`, `description`, ….
//!
//! Cost: validating a valid input allocates nothing beyond the `pattern` engine's pooled
//! scratch space, except a copy of each property name under `propertyNames`, and a map
//! remembering, per value, the verdict of a definition that several `$ref`s share (so that a
//! recursive union, an expression tree under `oneOf`, is checked in time linear in the input
//! rather than exponential); such a definition is applied to each value at most once. Walks
//! deeper than [`MAX_DEPTH`] schema steps fail with a violation rather than exhaust the stack.
//!
//! Conformance: `core/tests/schema_conformance.rs` runs the JSON-Schema-Test-Suite (drafts
//! 2020-12 and 7) for these keywords, and lists the cases left out (those of the unsupported
//! features above) with the reason.

use std::collections::HashMap;
use std::fmt::{self, Write as _};

use std::cmp::Ordering;

use regex_automata::meta::Regex;
use serde_json::{Map, Number, Value};

/// At most this many problems are reported for one input.
const MAX_REPORTED: usize = 5;

/// The most schema steps one walk may nest: each applied subschema is a step. An input is at
/// most 127 levels deep (`json_text::MAX_NESTING`), and a recursive schema takes two to four
/// steps a level (a property, an `anyOf`, its `$ref`), so a real input stays below; beyond, the
/// input is refused, as a bound on the stack the walk uses: 512 steps take under 1 MiB in a
/// debug build and under 256 KiB optimised (`deep_walks_are_bounded`), within the 2 MiB of a
/// tokio worker thread.
pub const MAX_DEPTH: usize = 512;

/// A schema that cannot be compiled (a supported keyword with an ill-formed value, a `$ref`
/// that resolves to nothing, or a cycle of references).
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
    /// The schemas `$ref`s name, each compiled once; [`Checks::reference`] indexes them. An
    /// arena rather than shared pointers, so that a recursive schema is no reference cycle.
    targets: Vec<Target>,
}

/// A schema a `$ref` names.
#[derive(Debug, Clone, PartialEq)]
struct Target {
    node: Node,
    /// Named by more than one `$ref`: its verdicts are remembered per value, as it may be
    /// reached by several paths on the same value.
    shared: bool,
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
    /// The rarer keywords; boxed, so that a schema without them costs one test.
    extra: Option<Box<Extra>>,
}

/// `pattern`, `patternProperties`, the dependencies, `$ref` and the applicators of one schema.
#[derive(Debug, Clone, PartialEq, Default)]
struct Extra {
    pattern: Option<Pattern>,
    pattern_properties: Vec<(Pattern, Node)>,
    /// A `patternProperties` pattern could not be compiled: a name no other keyword covers may
    /// be one it covers, so `additionalProperties` is not applied (refusing a property the
    /// schema allows would be worse than not checking one).
    unknown_patterns: bool,
    /// `dependentRequired` (and `dependencies` with an array): when the first property is
    /// present, the others must be.
    dependent_required: Vec<(String, Vec<String>)>,
    /// `dependentSchemas` (and `dependencies` with a schema): when the property is present, the
    /// object must satisfy the schema.
    dependent_schemas: Vec<(String, Node)>,
    /// `$ref`: an index into [`InputSchema::targets`].
    reference: Option<usize>,
    all_of: Vec<Node>,
    any_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Node>,
    /// `if`, `then`, `else`; boxed, as most schemas have none.
    condition: Option<Box<Condition>>,
    /// `contains`, with `minContains` and `maxContains`.
    contains: Option<Box<Contains>>,
    /// `propertyNames`: the schema each property name (a string) must satisfy.
    property_names: Option<Node>,
}

#[derive(Debug, Clone, PartialEq)]
struct Contains {
    node: Node,
    /// `minContains` (1 when absent).
    min: u64,
    max: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
struct Condition {
    test: Node,
    then: Option<Node>,
    otherwise: Option<Node>,
}

/// A compiled `pattern`, compared by its source.
#[derive(Debug, Clone)]
struct Pattern {
    source: String,
    regex: Regex,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Pattern {
    /// Compiles an ECMA-262 pattern, or `None` (with a warning) when the engine cannot.
    fn compile(source: &str, path: &str) -> Option<Self> {
        match Regex::new(&ecma_to_rust(source)) {
            Ok(regex) => Some(Self {
                source: source.to_owned(),
                regex,
            }),
            Err(error) => {
                // Refusing the schema would make a tool unregistrable for a pattern written
                // for JavaScript (zod's e-mail pattern uses look-ahead): the one keyword is
                // dropped instead, and the tool's author told.
                tracing::warn!(
                    schema_path = if path.is_empty() { "/" } else { path },
                    pattern = source,
                    %error,
                    "input schema pattern not supported by the regex engine; it is not checked"
                );
                None
            }
        }
    }

    fn matches(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }
}

/// ECMA-262's `\s`: its WhiteSpace (with U+FEFF, which Unicode's White_Space lacks) and
/// LineTerminator (without U+0085, which Unicode's White_Space has), as the inside of a class.
const ECMA_SPACE: &str = r"\t\n\x0B\x0C\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

/// Rewrites the ECMA-262 classes whose meaning differs in the Rust engine: `\d`, `\w` and `\b`
/// are ASCII in ECMA-262 (without the `v` flag) and Unicode-aware here; `\s` is ECMA-262's
/// white space and line terminators, not Unicode's White_Space; `\cX` is a control character
/// (the engine has no such escape); `.` matches no line terminator (`\r`, U+2028 and U+2029
/// too, where the engine's stops only at `\n`); a `[` inside a class is a literal in ECMA-262
/// and a nested class here, and `\b` in a class is a backspace. Other syntax is passed on as
/// written (what the engine cannot parse then disables the pattern).
fn ecma_to_rust(source: &str) -> String {
    let mut out = String::with_capacity(source.len() + 8);
    let mut in_class = false;
    let mut chars = source.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                match next {
                    'd' => out.push_str("[0-9]"),
                    'D' => out.push_str("[^0-9]"),
                    'w' => out.push_str("[0-9A-Za-z_]"),
                    'W' => out.push_str("[^0-9A-Za-z_]"),
                    's' => {
                        out.push('[');
                        out.push_str(ECMA_SPACE);
                        out.push(']');
                    }
                    'S' => {
                        out.push_str("[^");
                        out.push_str(ECMA_SPACE);
                        out.push(']');
                    }
                    // `\cX`: the control character of the letter X.
                    'c' if chars
                        .clone()
                        .next()
                        .is_some_and(|l| l.is_ascii_alphabetic()) =>
                    {
                        let letter = chars.next().map_or(0, |l| l as u32);
                        let _ = write!(out, "\\x{:02X}", letter % 32);
                    }
                    'b' if in_class => out.push_str("\\x08"),
                    'b' => out.push_str("(?-u:\\b)"),
                    'B' if !in_class => out.push_str("(?-u:\\B)"),
                    _ => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            '[' if in_class => out.push_str("\\["),
            '[' => {
                in_class = true;
                out.push('[');
                // A `]` first in a class (after an optional `^`) is a literal in the Rust
                // engine, and in ECMA-262 ends an empty class; both are rare: left as is.
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            // ECMA-262's `.` (without the `s` flag) stops at every line terminator; the Rust
            // engine's only at `\n`.
            '.' if !in_class => out.push_str("[^\\n\\r\\x{2028}\\x{2029}]"),
            // Set operators in a Rust class, plain characters in ECMA-262.
            '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
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
        Self {
            root: Node::Any,
            targets: Vec::new(),
        }
    }

    /// Compiles a JSON schema.
    pub fn compile(schema: &Value) -> Result<Self, SchemaError> {
        let base = schema.get("$id").and_then(Value::as_str).map(uri_of);
        let mut compiler = Compiler {
            document: schema,
            base,
            resource: Resource {
                root: schema,
                id: base,
                path: String::new(),
            },
            targets: Vec::new(),
            by_address: HashMap::new(),
            pending: Vec::new(),
        };
        let root = compiler.node(schema, &mut String::new())?;
        // Referenced schemas are compiled after the tree that names them, from a work list
        // rather than by recursion, so that a recursive schema compiles each target once.
        while let Some((index, value, mut path, resource)) = compiler.pending.pop() {
            compiler.resource = resource;
            compiler.targets[index].node = compiler.node(value, &mut path)?;
        }
        find_cycle(&compiler.targets)?;
        let targets = compiler
            .targets
            .into_iter()
            .map(|target| Target {
                node: target.node,
                shared: target.names > 1,
            })
            .collect();
        Ok(Self { root, targets })
    }

    /// Checks `input`; on failure, returns the first few violations (never empty).
    pub fn validate(&self, input: &Value) -> Result<(), Vec<Violation>> {
        // The common case (valid input) takes a walk that builds no paths and allocates nothing;
        // only a failing input is walked again to describe where and why.
        let mut walk = Walk::default();
        let conforming = self.conforms(&self.root, input, &mut walk);
        if walk.too_deep {
            // Some part went unchecked, whatever the verdict: refused.
            return Err(vec![Violation {
                path: "input".to_owned(),
                problem: "nested too deeply to check against this tool's schema".to_owned(),
            }]);
        }
        if conforming {
            return Ok(());
        }
        let mut violations = Vec::new();
        let mut path = String::from("input");
        self.check(&self.root, input, &mut path, &mut violations, &mut walk);
        if violations.is_empty() && walk.too_deep {
            // The report went deeper than the check (into an alternative the check did not
            // need) and stopped there: still refused.
            violations.push(Violation {
                path: "input".to_owned(),
                problem: "nested too deeply to check against this tool's schema".to_owned(),
            });
        }
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

/// A referenced schema while the document is compiled.
struct Compiled {
    node: Node,
    /// How many `$ref`s name it.
    names: usize,
    /// The reference, normalised (`#/$defs/A`), for messages.
    label: String,
}

/// A schema resource: the document, or a subschema with an `$id` of its own (a URI, not only a
/// fragment), against which the `$ref`s inside it resolve their fragments.
#[derive(Clone)]
struct Resource<'a> {
    root: &'a Value,
    /// Its `$id` without the fragment, as written (not resolved against the outer base).
    id: Option<&'a str>,
    /// Where its root is in the document.
    path: String,
}

/// A URI without its fragment.
fn uri_of(id: &str) -> &str {
    id.split_once('#').map_or(id, |(uri, _)| uri)
}

/// The `$id` of `schema` when it starts a new schema resource (a URI, not only a fragment:
/// draft-07's `"$id": "#name"` is an anchor).
fn resource_id(schema: &Value) -> Option<&str> {
    let id = uri_of(schema.get("$id")?.as_str()?);
    (!id.is_empty()).then_some(id)
}

struct Compiler<'a> {
    document: &'a Value,
    /// The document's `$id` without its fragment: a `$ref` starting with it is local.
    base: Option<&'a str>,
    /// The innermost resource around the schema being compiled.
    resource: Resource<'a>,
    targets: Vec<Compiled>,
    /// The target compiled for each referenced schema, by its address in the document (two
    /// spellings of one pointer, `#/$defs/A` and `#/%24defs/A`, are one target).
    by_address: HashMap<*const Value, usize>,
    /// Targets named but not compiled yet, with their place in the document and the resource
    /// they lie in.
    pending: Vec<(usize, &'a Value, String, Resource<'a>)>,
}

impl<'a> Compiler<'a> {
    fn node(&mut self, schema: &'a Value, path: &mut String) -> Result<Node, SchemaError> {
        // A subschema with its own `$id` is a resource of its own: the fragments of the `$ref`s
        // inside it name places in it, not in the document.
        let outer = match resource_id(schema) {
            Some(id) if !std::ptr::eq(schema, self.document) => Some(std::mem::replace(
                &mut self.resource,
                Resource {
                    root: schema,
                    id: Some(id),
                    path: path.clone(),
                },
            )),
            _ => None,
        };
        let node = self.node_in_resource(schema, path);
        if let Some(outer) = outer {
            self.resource = outer;
        }
        node
    }

    fn node_in_resource(
        &mut self,
        schema: &'a Value,
        path: &mut String,
    ) -> Result<Node, SchemaError> {
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
        let mut extra = Extra::default();
        if let Some(allowed) = object.get("enum") {
            let Value::Array(values) = allowed else {
                return Err(schema_error(path, "`enum` must be an array"));
            };
            checks.allowed = Some(values.clone());
        }
        checks.constant = object.get("const").cloned();
        if let Some(pattern) = object.get("pattern") {
            let Value::String(pattern) = pattern else {
                return Err(schema_error(path, "`pattern` must be a string"));
            };
            extra.pattern = Pattern::compile(pattern, path);
        }
        if let Some(required) = object.get("required") {
            checks.required = string_list(required)
                .ok_or_else(|| schema_error(path, "`required` must be an array of strings"))?;
        }
        checks.properties = self.named(object, "properties", path)?;
        for (source, node) in self.named(object, "patternProperties", path)? {
            // A pattern the engine cannot run leaves its properties unchecked.
            match Pattern::compile(&source, path) {
                Some(pattern) => extra.pattern_properties.push((pattern, node)),
                None => extra.unknown_patterns = true,
            }
        }
        checks.additional = self.child(object, "additionalProperties", path)?;
        self.dependencies(object, &mut extra, path)?;
        match (object.get("prefixItems"), object.get("items")) {
            (Some(prefix), _) => {
                checks.tuple = self.list(prefix, "prefixItems", path)?;
                checks.items_from = checks.tuple.len();
                checks.items = self.child(object, "items", path)?;
            }
            (None, Some(positions @ Value::Array(_))) => {
                checks.tuple = self.list(positions, "items", path)?;
                // Draft-07: the schema of the positions past the tuple (zod's `.rest()`).
                checks.items_from = checks.tuple.len();
                checks.items = self.child(object, "additionalItems", path)?;
            }
            (None, _) => checks.items = self.child(object, "items", path)?,
        }
        checks.bounds = compile_bounds(object, path)?.map(Box::new);
        if let Some(reference) = object.get("$ref") {
            let Value::String(reference) = reference else {
                return Err(schema_error(path, "`$ref` must be a string"));
            };
            extra.reference = self.reference(reference, path)?;
        }
        for (keyword, nodes) in [
            ("allOf", &mut extra.all_of),
            ("anyOf", &mut extra.any_of),
            ("oneOf", &mut extra.one_of),
        ] {
            if let Some(list) = object.get(keyword) {
                *nodes = self.list(list, keyword, path)?;
                if nodes.is_empty() {
                    return Err(schema_error(
                        path,
                        &format!("`{keyword}` must not be empty"),
                    ));
                }
            }
        }
        extra.not = self.child(object, "not", path)?;
        extra.property_names = self.child(object, "propertyNames", path)?;
        if let Some(node) = self.child(object, "contains", path)? {
            let (min, max) = compile_contains(object, path)?;
            extra.contains = Some(Box::new(Contains {
                node,
                min: min.unwrap_or(1),
                max,
            }));
        }
        if let Some(test) = self.child(object, "if", path)? {
            let then = self.child(object, "then", path)?;
            let otherwise = self.child(object, "else", path)?;
            // Without `then` and `else`, `if` decides nothing.
            if then.is_some() || otherwise.is_some() {
                extra.condition = Some(Box::new(Condition {
                    test,
                    then,
                    otherwise,
                }));
            }
        }
        if extra != Extra::default() {
            checks.extra = Some(Box::new(extra));
        }
        let trivial = checks == Checks::default();
        Ok(if trivial {
            Node::Any
        } else {
            Node::Checks(Box::new(checks))
        })
    }

    fn child(
        &mut self,
        object: &'a Map<String, Value>,
        keyword: &str,
        path: &mut String,
    ) -> Result<Option<Node>, SchemaError> {
        let Some(sub) = object.get(keyword) else {
            return Ok(None);
        };
        let mark = path.len();
        let _ = write!(path, "/{keyword}");
        let node = self.node(sub, path)?;
        path.truncate(mark);
        Ok(Some(node))
    }

    /// The schemas of an array under `keyword` (tuple positions, `allOf`, ...).
    fn list(
        &mut self,
        list: &'a Value,
        keyword: &str,
        path: &mut String,
    ) -> Result<Vec<Node>, SchemaError> {
        let Value::Array(list) = list else {
            return Err(schema_error(path, &format!("`{keyword}` must be an array")));
        };
        let mut nodes = Vec::with_capacity(list.len());
        for (i, sub) in list.iter().enumerate() {
            let mark = path.len();
            let _ = write!(path, "/{keyword}/{i}");
            nodes.push(self.node(sub, path)?);
            path.truncate(mark);
        }
        Ok(nodes)
    }

    /// The schemas of an object under `keyword` (`properties`, ...), by name.
    fn named(
        &mut self,
        object: &'a Map<String, Value>,
        keyword: &str,
        path: &mut String,
    ) -> Result<Vec<(String, Node)>, SchemaError> {
        let Some(named) = object.get(keyword) else {
            return Ok(Vec::new());
        };
        let Value::Object(named) = named else {
            return Err(schema_error(
                path,
                &format!("`{keyword}` must be an object"),
            ));
        };
        let mut nodes = Vec::with_capacity(named.len());
        for (name, sub) in named {
            let mark = path.len();
            let _ = write!(path, "/{keyword}/{name}");
            nodes.push((name.clone(), self.node(sub, path)?));
            path.truncate(mark);
        }
        Ok(nodes)
    }

    /// `dependentRequired`, `dependentSchemas`, and draft-07's `dependencies` (both at once).
    fn dependencies(
        &mut self,
        object: &'a Map<String, Value>,
        extra: &mut Extra,
        path: &mut String,
    ) -> Result<(), SchemaError> {
        for keyword in ["dependentRequired", "dependencies"] {
            let Some(map) = object.get(keyword) else {
                continue;
            };
            let Value::Object(map) = map else {
                return Err(schema_error(
                    path,
                    &format!("`{keyword}` must be an object"),
                ));
            };
            for (name, value) in map {
                if keyword == "dependencies" && !value.is_array() {
                    continue;
                }
                let names = string_list(value).ok_or_else(|| {
                    schema_error(
                        path,
                        &format!("`{keyword}` values must be arrays of strings"),
                    )
                })?;
                extra.dependent_required.push((name.clone(), names));
            }
        }
        extra.dependent_schemas = self.named(object, "dependentSchemas", path)?;
        if let Some(Value::Object(map)) = object.get("dependencies") {
            for (name, sub) in map.iter().filter(|(_, sub)| !sub.is_array()) {
                let mark = path.len();
                let _ = write!(path, "/dependencies/{name}");
                let node = self.node(sub, path)?;
                path.truncate(mark);
                extra.dependent_schemas.push((name.clone(), node));
            }
        }
        Ok(())
    }

    /// The target a `$ref` names, compiled later (`None` for a reference to another document,
    /// which is not checked).
    fn reference(&mut self, reference: &str, path: &str) -> Result<Option<usize>, SchemaError> {
        let (uri, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        // A fragment alone names a place in the innermost resource; the document's `$id` (or
        // that resource's, as written) in front names the same document.
        let resource = if uri.is_empty() || self.resource.id == Some(uri) {
            Some(self.resource.clone())
        } else if self.base == Some(uri) {
            Some(Resource {
                root: self.document,
                id: self.base,
                path: String::new(),
            })
        } else {
            None
        };
        let local = resource.is_some();
        let pointer = if local {
            percent_decode(fragment).ok_or_else(|| {
                schema_error(
                    path,
                    &format!("`$ref` \"{reference}\" is not a valid URI fragment"),
                )
            })?
        } else {
            String::new()
        };
        let Some(resource) = resource.filter(|_| pointer.is_empty() || pointer.starts_with('/'))
        else {
            // Another document, or an anchor: neither fetched nor searched. Refusing the schema
            // would make tools unregistrable that registered (unchecked) before.
            tracing::warn!(
                schema_path = if path.is_empty() { "/" } else { path },
                reference,
                "input schema `$ref` to another document or an anchor is not followed; \
                 what it names is not checked"
            );
            return Ok(None);
        };
        let (target, inner) = resolve(resource.root, &pointer).ok_or_else(|| {
            schema_error(
                path,
                &format!("`$ref` \"{reference}\" does not resolve in this schema"),
            )
        })?;
        // Where the target is in the document, and the resource it lies in: a subschema with
        // its own `$id` on the way, or the one the pointer started from.
        let target_path = format!("{}{pointer}", resource.path);
        let resource = match inner {
            Some((root, id, prefix)) => Resource {
                root,
                id: Some(id),
                path: format!("{}{}", resource.path, &pointer[..prefix]),
            },
            None => resource,
        };
        let address: *const Value = target;
        let next = self.targets.len();
        let index = *self.by_address.entry(address).or_insert(next);
        if index == next {
            self.targets.push(Compiled {
                node: Node::Any,
                names: 0,
                label: format!("#{target_path}"),
            });
            self.pending.push((index, target, target_path, resource));
        }
        self.targets[index].names += 1;
        Ok(Some(index))
    }
}

/// `minContains` and `maxContains`.
fn compile_contains(
    object: &Map<String, Value>,
    path: &str,
) -> Result<(Option<u64>, Option<u64>), SchemaError> {
    Ok((
        count_keyword(object, "minContains", path)?,
        count_keyword(object, "maxContains", path)?,
    ))
}

/// A count keyword (`minLength`, `maxItems`, `minContains`, ...): a non-negative integer, where
/// `2.0` is an integer, as JSON Schema says.
fn count_keyword(
    object: &Map<String, Value>,
    keyword: &str,
    path: &str,
) -> Result<Option<u64>, SchemaError> {
    let Some(value) = object.get(keyword) else {
        return Ok(None);
    };
    let whole = || value.as_f64().filter(|f| *f >= 0.0 && f.fract() == 0.0);
    value
        .as_u64()
        .or_else(|| whole().map(|f| f as u64))
        .map(Some)
        .ok_or_else(|| schema_error(path, &format!("`{keyword}` must be a non-negative integer")))
}

fn string_list(value: &Value) -> Option<Vec<String>> {
    value.as_array().and_then(|names| {
        names
            .iter()
            .map(|name| name.as_str().map(str::to_owned))
            .collect()
    })
}

/// A URI fragment with its `%XX` escapes decoded; `None` when they are malformed or do not
/// spell UTF-8.
fn percent_decode(fragment: &str) -> Option<String> {
    if !fragment.contains('%') {
        return Some(fragment.to_owned());
    }
    let mut bytes = Vec::with_capacity(fragment.len());
    let mut rest = fragment.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        if byte == b'%' {
            let hex = tail.get(..2)?;
            let hex = std::str::from_utf8(hex).ok()?;
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            rest = &tail[2..];
        } else {
            bytes.push(byte);
            rest = tail;
        }
    }
    String::from_utf8(bytes).ok()
}

/// The value a JSON pointer (RFC 6901, already percent-decoded) names in `document`, and the
/// innermost subschema with an `$id` of its own passed on the way there (not `document`, not
/// the value named): that subschema, its `$id`, and the length of the pointer to it.
#[allow(clippy::type_complexity)]
fn resolve<'a>(
    document: &'a Value,
    pointer: &str,
) -> Option<(&'a Value, Option<(&'a Value, &'a str, usize)>)> {
    if pointer.is_empty() {
        return Some((document, None));
    }
    let mut value = document;
    let mut inner = None;
    let mut offset = 0;
    for token in pointer.strip_prefix('/')?.split('/') {
        if let Some(id) = resource_id(value).filter(|_| offset > 0) {
            inner = Some((value, id, offset));
        }
        offset += 1 + token.len();
        let token = unescape_token(token)?;
        value = match value {
            Value::Object(object) => object.get(token.as_str())?,
            Value::Array(items) => {
                // RFC 6901: decimal digits, no leading zero.
                let canonical = token.bytes().all(|b| b.is_ascii_digit())
                    && (token == "0" || !token.starts_with('0'));
                if !canonical {
                    return None;
                }
                items.get(token.parse::<usize>().ok()?)?
            }
            _ => return None,
        };
    }
    Some((value, inner))
}

/// A pointer token with `~1` as `/` and `~0` as `~`; `None` for another `~` sequence.
fn unescape_token(token: &str) -> Option<String> {
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn extra_of(node: &Node) -> Option<&Extra> {
    match node {
        Node::Checks(checks) => checks.extra.as_deref(),
        _ => None,
    }
}

/// The targets `node` applies to the very value it is applied to (through `$ref`, `allOf`,
/// `anyOf`, `oneOf`, `not`, `if`/`then`/`else`, `dependentSchemas`), as opposed to the values
/// inside it (`properties`, `items`, ...).
fn in_place_targets(node: &Node, found: &mut Vec<usize>) {
    let Some(checks) = extra_of(node) else {
        return;
    };
    found.extend(checks.reference);
    let condition = checks.condition.iter().flat_map(|condition| {
        [
            Some(&condition.test),
            condition.then.as_ref(),
            condition.otherwise.as_ref(),
        ]
        .into_iter()
        .flatten()
    });
    let nodes = (checks.all_of.iter())
        .chain(&checks.any_of)
        .chain(&checks.one_of)
        .chain(&checks.not)
        .chain(checks.dependent_schemas.iter().map(|(_, node)| node))
        .chain(condition);
    for node in nodes {
        in_place_targets(node, found);
    }
}

/// Refuses a cycle of targets that applies to the same value round and round: following it
/// would never end (JSON Schema leaves such a schema undefined). A cycle through `properties`
/// or `items` is a recursive type, and ends with the input.
fn find_cycle(targets: &[Compiled]) -> Result<(), SchemaError> {
    let edges: Vec<Vec<usize>> = targets
        .iter()
        .map(|target| {
            let mut found = Vec::new();
            in_place_targets(&target.node, &mut found);
            found
        })
        .collect();
    // Iterative depth-first search (a long chain of references must not exhaust the stack):
    // 0 unvisited, 1 on the current path, 2 done.
    let mut state = vec![0u8; targets.len()];
    for start in 0..targets.len() {
        if state[start] != 0 {
            continue;
        }
        let mut stack = vec![(start, 0usize)];
        state[start] = 1;
        while let Some((node, next)) = stack.last_mut() {
            let node = *node;
            if let Some(&to) = edges[node].get(*next) {
                *next += 1;
                match state[to] {
                    0 => {
                        state[to] = 1;
                        stack.push((to, 0));
                    }
                    1 => {
                        let from = stack.iter().position(|&(n, _)| n == to).unwrap_or(0);
                        let mut labels: Vec<&str> = stack[from..]
                            .iter()
                            .map(|&(n, _)| targets[n].label.as_str())
                            .collect();
                        labels.push(targets[to].label.as_str());
                        let path = targets[to].label.trim_start_matches('#');
                        return Err(schema_error(
                            path,
                            &format!(
                                "`$ref` cycle that never reaches a value's contents: {}",
                                labels.join(" -> ")
                            ),
                        ));
                    }
                    _ => {}
                }
            } else {
                state[node] = 2;
                stack.pop();
            }
        }
    }
    Ok(())
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
    let count = |keyword: &str| count_keyword(object, keyword, path);
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
        // The quotient overflows. An integer is still a multiple of a step 1/k for a whole k
        // (`1e308` of `0.5`); of another step (`0.123456789`), no multiple is representable
        // near it.
        let reciprocal = 1.0 / step;
        return x.fract() == 0.0 && reciprocal.is_finite() && reciprocal.fract() == 0.0;
    }
    (x - step * nearest).abs() <= 2.0 * f64::EPSILON * x.abs()
}

fn report(violations: &mut Vec<Violation>, path: &str, problem: String) {
    if violations.len() < MAX_REPORTED {
        violations.push(Violation {
            path: path.to_owned(),
            problem,
        });
    }
}

/// The state of one validation's walks.
#[derive(Default)]
struct Walk {
    /// Schema steps nested now.
    depth: usize,
    /// A walk went past [`MAX_DEPTH`]: the verdict covers only part of the input.
    too_deep: bool,
    /// The verdict of a shared target on a value, by the value's address (stable while the
    /// input is borrowed). Made (and allocated) only when a shared target is first applied:
    /// even an empty `HashMap` seeds its hasher, a cost the common walk need not pay.
    verdicts: Option<HashMap<(usize, *const Value), bool>>,
    /// Above 0 while a value made for the walk (a property name) is checked: its address is
    /// not the input's, so no verdict is remembered or looked up by it.
    transient: usize,
}

/// How far `value` is from satisfying `node`, judged on `node`'s own keywords and one level of
/// its properties, for choosing which `anyOf`/`oneOf` alternative to report on (a full walk
/// of each alternative would cost a walk per alternative per level). `None`: a wrong type.
fn distance(schema: &InputSchema, node: &Node, value: &Value) -> Option<usize> {
    let mut node = node;
    let mut total = 0;
    // Following `$ref`s ends: a cycle of them was refused at compile time; the bound is only a
    // second guard.
    for _ in 0..=schema.targets.len() {
        let checks = match node {
            Node::Any => return Some(total),
            Node::Never => return None,
            Node::Checks(checks) => checks,
        };
        if checks.types.is_some_and(|types| !types.accepts(value)) {
            return None;
        }
        // A `const` or `enum` missed is a strong sign of the wrong alternative (a tag).
        if checks.misses_enum_or_const(value) {
            total += 10;
        }
        if checks
            .bounds
            .as_ref()
            .is_some_and(|b| broken_bound(b, value).is_some())
        {
            total += 1;
        }
        if let Value::Object(object) = value {
            total += checks
                .required
                .iter()
                .filter(|name| !object.contains_key(*name))
                .count();
            for (name, value) in object {
                let Some((_, Node::Checks(property))) =
                    checks.properties.iter().find(|(known, _)| known == name)
                else {
                    continue;
                };
                if property.types.is_some_and(|types| !types.accepts(value)) {
                    total += 1;
                }
                if property.misses_enum_or_const(value) {
                    total += 10;
                }
            }
        }
        match checks.extra.as_ref().and_then(|extra| extra.reference) {
            Some(index) => node = &schema.targets[index].node,
            None => return Some(total),
        }
    }
    Some(total)
}

/// The types `node` admits, following `$ref`s (`None`: any type).
fn admitted_types(schema: &InputSchema, node: &Node) -> Option<TypeSet> {
    let mut node = node;
    for _ in 0..=schema.targets.len() {
        match node {
            Node::Any => return None,
            Node::Never => return Some(TypeSet(0)),
            Node::Checks(checks) => {
                if checks.types.is_some() {
                    return checks.types;
                }
                node = &schema.targets[checks.extra.as_ref()?.reference?].node;
            }
        }
    }
    None
}

/// `1`, `0 and 2`, `0, 1 and 2`.
fn enumerate(indices: &[usize]) -> String {
    let mut text = String::new();
    for (n, index) in indices.iter().enumerate() {
        if n > 0 {
            text.push_str(if n + 1 == indices.len() {
                " and "
            } else {
                ", "
            });
        }
        let _ = write!(text, "{index}");
    }
    text
}

impl InputSchema {
    /// Whether `value` satisfies `node` (the same rules as [`InputSchema::check`], without
    /// reporting).
    fn conforms(&self, node: &Node, value: &Value, walk: &mut Walk) -> bool {
        if walk.depth >= MAX_DEPTH {
            walk.too_deep = true;
            return false;
        }
        walk.depth += 1;
        let verdict = self.conforms_here(node, value, walk);
        walk.depth -= 1;
        verdict
    }

    /// Whether `value` satisfies the target `index`, remembered for a shared one.
    fn conforms_to_target(&self, index: usize, value: &Value, walk: &mut Walk) -> bool {
        let target = &self.targets[index];
        if !target.shared || walk.transient > 0 {
            // Reached by one `$ref` only: each value meets it at most as often as that
            // `$ref`'s own schema, so nothing is gained by remembering.
            return self.conforms(&target.node, value, walk);
        }
        let key = (index, std::ptr::from_ref(value));
        if let Some(&verdict) = walk.verdicts.as_ref().and_then(|known| known.get(&key)) {
            return verdict;
        }
        let verdict = self.conforms(&target.node, value, walk);
        walk.verdicts
            .get_or_insert_with(HashMap::new)
            .insert(key, verdict);
        verdict
    }

    fn conforms_here(&self, node: &Node, value: &Value, walk: &mut Walk) -> bool {
        let checks = match node {
            Node::Any => return true,
            Node::Never => return false,
            Node::Checks(checks) => checks,
        };
        if checks.types.is_some_and(|types| !types.accepts(value)) {
            return false;
        }
        if checks.misses_enum_or_const(value) {
            return false;
        }
        if checks
            .bounds
            .as_ref()
            .is_some_and(|bounds| broken_bound(bounds, value).is_some())
        {
            return false;
        }
        if let Some(extra) = checks.extra.as_deref()
            && !self.extra_conforms(extra, value, walk)
        {
            return false;
        }
        match value {
            Value::Object(object) => self.object_conforms(checks, object, value, walk),
            Value::Array(items) => {
                checks.items.as_ref().is_none_or(|node| {
                    items
                        .iter()
                        .skip(checks.items_from)
                        .all(|item| self.conforms(node, item, walk))
                }) && checks
                    .tuple
                    .iter()
                    .zip(items)
                    .all(|(node, item)| self.conforms(node, item, walk))
            }
            _ => true,
        }
    }

    /// The keywords of [`Extra`] (the same rules as [`InputSchema::check_extra`]).
    fn extra_conforms(&self, extra: &Extra, value: &Value, walk: &mut Walk) -> bool {
        if let (Some(pattern), Value::String(text)) = (&extra.pattern, value)
            && !pattern.matches(text)
        {
            return false;
        }
        if let Some(index) = extra.reference
            && !self.conforms_to_target(index, value, walk)
        {
            return false;
        }
        if !extra
            .all_of
            .iter()
            .all(|node| self.conforms(node, value, walk))
        {
            return false;
        }
        if !extra.any_of.is_empty()
            && !extra
                .any_of
                .iter()
                .any(|node| self.conforms(node, value, walk))
        {
            return false;
        }
        if !extra.one_of.is_empty() {
            // Every alternative is tried (two matches refuse): linear in the alternatives.
            let mut matched = 0;
            for node in &extra.one_of {
                if self.conforms(node, value, walk) {
                    matched += 1;
                    if matched > 1 {
                        return false;
                    }
                }
            }
            if matched == 0 {
                return false;
            }
        }
        if let Some(not) = &extra.not
            && self.conforms(not, value, walk)
        {
            return false;
        }
        if let Some(condition) = &extra.condition {
            let branch = if self.conforms(&condition.test, value, walk) {
                &condition.then
            } else {
                &condition.otherwise
            };
            if let Some(branch) = branch
                && !self.conforms(branch, value, walk)
            {
                return false;
            }
        }
        if let (Some(contains), Value::Array(items)) = (&extra.contains, value) {
            let mut found = 0;
            for item in items {
                if self.conforms(&contains.node, item, walk) {
                    found += 1;
                    if contains.max.is_some_and(|max| found > max) {
                        return false;
                    }
                    if contains.max.is_none() && found >= contains.min {
                        break;
                    }
                }
            }
            if found < contains.min {
                return false;
            }
        }
        if let (Some(names), Value::Object(object)) = (&extra.property_names, value) {
            // Each name is checked as a string made for the purpose, whose address the
            // per-value verdicts must not remember (another may take it next).
            walk.transient += 1;
            let all = object
                .keys()
                .all(|name| self.conforms(names, &Value::String(name.clone()), walk));
            walk.transient -= 1;
            if !all {
                return false;
            }
        }
        true
    }

    fn check_extra(
        &self,
        extra: &Extra,
        value: &Value,
        path: &mut String,
        violations: &mut Vec<Violation>,
        walk: &mut Walk,
    ) {
        // A shared target is walked only where it fails (its verdict is remembered), so that
        // the report costs no more than the check.
        if let Some(index) = extra.reference {
            let target = &self.targets[index];
            if !target.shared || !self.conforms_to_target(index, value, walk) {
                self.check(&target.node, value, path, violations, walk);
            }
        }
        for node in &extra.all_of {
            self.check(node, value, path, violations, walk);
        }
        if !extra.any_of.is_empty()
            && !extra
                .any_of
                .iter()
                .any(|node| self.conforms(node, value, walk))
        {
            self.report_no_match(&extra.any_of, "anyOf", value, path, violations, walk);
        }
        if !extra.one_of.is_empty() {
            self.check_one_of(&extra.one_of, value, path, violations, walk);
        }
        if let Some(not) = &extra.not
            && self.conforms(not, value, walk)
        {
            let problem = "must not match the schema under `not`".to_owned();
            report(violations, path, problem);
        }
        if let Some(condition) = &extra.condition {
            let branch = if self.conforms(&condition.test, value, walk) {
                &condition.then
            } else {
                &condition.otherwise
            };
            if let Some(branch) = branch {
                self.check(branch, value, path, violations, walk);
            }
        }
        if let (Some(contains), Value::Array(items)) = (&extra.contains, value) {
            self.check_contains(contains, items, path, violations, walk);
        }
        if let (Some(names), Value::Object(object)) = (&extra.property_names, value) {
            self.check_property_names(names, object, path, violations, walk);
        }
    }
    // The reports below are kept out of the recursive functions (`check`, `check_here`,
    // `check_extra`): their temporaries would otherwise take room in every frame of a deep
    // walk, and the walk's depth is bounded by the stack it may use.

    #[inline(never)]
    fn check_one_of(
        &self,
        alternatives: &[Node],
        value: &Value,
        path: &mut String,
        violations: &mut Vec<Violation>,
        walk: &mut Walk,
    ) {
        let matched: Vec<usize> = (0..alternatives.len())
            .filter(|&i| self.conforms(&alternatives[i], value, walk))
            .collect();
        if matched.is_empty() {
            self.report_no_match(alternatives, "oneOf", value, path, violations, walk);
        } else if matched.len() > 1 {
            let problem = format!(
                "must match exactly one alternative of `oneOf`, matched {} alternatives ({})",
                matched.len(),
                enumerate(&matched)
            );
            report(violations, path, problem);
        }
    }

    #[inline(never)]
    fn check_contains(
        &self,
        contains: &Contains,
        items: &[Value],
        path: &str,
        violations: &mut Vec<Violation>,
        walk: &mut Walk,
    ) {
        let found = items
            .iter()
            .filter(|item| self.conforms(&contains.node, item, walk))
            .count() as u64;
        let noun = |n: u64| if n == 1 { "item" } else { "items" };
        if found < contains.min {
            let min = contains.min;
            let problem = format!(
                "must contain at least {min} {} matching `contains`, got {found}",
                noun(min)
            );
            report(violations, path, problem);
        } else if let Some(max) = contains.max.filter(|&max| found > max) {
            let problem = format!(
                "must contain at most {max} {} matching `contains`, got {found}",
                noun(max)
            );
            report(violations, path, problem);
        }
    }

    #[inline(never)]
    fn check_property_names(
        &self,
        names: &Node,
        object: &Map<String, Value>,
        path: &str,
        violations: &mut Vec<Violation>,
        walk: &mut Walk,
    ) {
        walk.transient += 1;
        for name in object.keys() {
            let name = Value::String(name.clone());
            let mut problems = Vec::new();
            self.check(names, &name, &mut String::new(), &mut problems, walk);
            for problem in problems {
                let problem = format!("property name {name}: {}", problem.problem);
                report(violations, path, problem);
            }
        }
        walk.transient -= 1;
    }

    fn object_conforms(
        &self,
        checks: &Checks,
        object: &Map<String, Value>,
        whole: &Value,
        walk: &mut Walk,
    ) -> bool {
        let extra = checks.extra.as_deref();
        let patterns = extra.map_or(&[][..], |extra| &extra.pattern_properties[..]);
        checks.required.iter().all(|name| object.contains_key(name))
            && extra.is_none_or(|extra| self.dependencies_hold(extra, object, whole, walk))
            && object.iter().all(|(name, value)| {
                let mut covered = false;
                if let Some((_, node)) = checks.properties.iter().find(|(known, _)| known == name) {
                    if !self.conforms(node, value, walk) {
                        return false;
                    }
                    covered = true;
                }
                for (pattern, node) in patterns {
                    if pattern.matches(name) {
                        if !self.conforms(node, value, walk) {
                            return false;
                        }
                        covered = true;
                    }
                }
                covered
                    || extra.is_some_and(|extra| extra.unknown_patterns)
                    || checks
                        .additional
                        .as_ref()
                        .is_none_or(|node| self.conforms(node, value, walk))
            })
    }

    /// `dependentRequired` and `dependentSchemas` (the same rules as
    /// [`InputSchema::check_object`]).
    fn dependencies_hold(
        &self,
        extra: &Extra,
        object: &Map<String, Value>,
        whole: &Value,
        walk: &mut Walk,
    ) -> bool {
        extra.dependent_required.iter().all(|(name, needed)| {
            !object.contains_key(name) || needed.iter().all(|n| object.contains_key(n))
        }) && extra
            .dependent_schemas
            .iter()
            .all(|(name, node)| !object.contains_key(name) || self.conforms(node, whole, walk))
    }

    fn check(
        &self,
        node: &Node,
        value: &Value,
        path: &mut String,
        violations: &mut Vec<Violation>,
        walk: &mut Walk,
    ) {
        // Past the cap nothing more is reported, so nothing more is walked.
        if violations.len() >= MAX_REPORTED {
            return;
        }
        if walk.depth >= MAX_DEPTH {
            walk.too_deep = true;
            return;
        }
        walk.depth += 1;
        self.check_here(node, value, path, violations, walk);
        walk.depth -= 1;
    }

    fn check_here(
        &self,
        node: &Node,
        value: &Value,
        path: &mut String,
        violations: &mut Vec<Violation>,
        walk: &mut Walk,
    ) {
        let checks = match node {
            Node::Any => return,
            Node::Never => return report(violations, path, "no value is allowed here".to_owned()),
            Node::Checks(checks) => checks,
        };
        if !report_own(checks, value, path, violations) {
            return;
        }
        if let Some(extra) = checks.extra.as_deref() {
            self.check_extra(extra, value, path, violations, walk);
        }
        match value {
            Value::Object(object) => {
                self.check_object(checks, object, value, path, violations, walk)
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    let rest = checks.items.iter().filter(|_| i >= checks.items_from);
                    let nodes = checks.tuple.get(i).into_iter().chain(rest);
                    for node in nodes {
                        let mark = path.len();
                        let _ = write!(path, "[{i}]");
                        self.check(node, item, path, violations, walk);
                        path.truncate(mark);
                    }
                }
            }
            _ => {}
        }
    }

    /// Reports that no alternative of `keyword` matched: the alternatives' types when the
    /// value's fits none, else the problems of the closest alternative.
    fn report_no_match(
        &self,
        alternatives: &[Node],
        keyword: &str,
        value: &Value,
        path: &mut String,
        violations: &mut Vec<Violation>,
        walk: &mut Walk,
    ) {
        let closest = alternatives
            .iter()
            .enumerate()
            .filter_map(|(i, node)| distance(self, node, value).map(|d| (d, i)))
            .min();
        let Some((_, closest)) = closest else {
            let mut types = TypeSet(0);
            for node in alternatives {
                types.0 |= admitted_types(self, node).map_or(0, |set| set.0);
            }
            let problem = format!(
                "matches no alternative of `{keyword}`: expected {}, got {}",
                types.describe(),
                type_name(value)
            );
            return report(violations, path, problem);
        };
        let problem =
            format!("matches no alternative of `{keyword}`; the closest is alternative {closest}");
        report(violations, path, problem);
        self.check(&alternatives[closest], value, path, violations, walk);
    }

    fn check_object(
        &self,
        checks: &Checks,
        object: &Map<String, Value>,
        whole: &Value,
        path: &mut String,
        violations: &mut Vec<Violation>,
        walk: &mut Walk,
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
        let extra = checks.extra.as_deref();
        let patterns = extra.map_or(&[][..], |extra| &extra.pattern_properties[..]);
        let (dependent_required, dependent_schemas) = extra.map_or((&[][..], &[][..]), |extra| {
            (&extra.dependent_required[..], &extra.dependent_schemas[..])
        });
        for (name, needed) in dependent_required {
            if !object.contains_key(name) {
                continue;
            }
            for other in needed.iter().filter(|other| !object.contains_key(*other)) {
                let problem =
                    format!("property \"{other}\" is required when \"{name}\" is present");
                report(violations, path, problem);
            }
        }
        for (name, node) in dependent_schemas {
            if object.contains_key(name) {
                self.check(node, whole, path, violations, walk);
            }
        }
        for (name, value) in object {
            let mark = path.len();
            let _ = write!(path, ".{name}");
            let mut covered = false;
            if let Some((_, node)) = checks.properties.iter().find(|(known, _)| known == name) {
                self.check(node, value, path, violations, walk);
                covered = true;
            }
            for (pattern, node) in patterns {
                if pattern.matches(name) {
                    self.check(node, value, path, violations, walk);
                    covered = true;
                }
            }
            if !covered && !extra.is_some_and(|extra| extra.unknown_patterns) {
                match &checks.additional {
                    Some(Node::Never) => {
                        path.truncate(mark);
                        report(violations, path, format!("unexpected property \"{name}\""));
                    }
                    Some(node) => self.check(node, value, path, violations, walk),
                    None => {}
                }
            }
            path.truncate(mark);
        }
    }
}

/// Reports the problems of `value` with `checks`' own keywords (not those of its parts or
/// alternatives); `false` when its type is wrong, which makes the others moot.
#[inline(never)]
fn report_own(checks: &Checks, value: &Value, path: &str, violations: &mut Vec<Violation>) -> bool {
    if let Some(types) = checks.types
        && !types.accepts(value)
    {
        let problem = format!("expected {}, got {}", types.describe(), type_name(value));
        report(violations, path, problem);
        return false;
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
    if let (Some(pattern), Value::String(text)) = (
        checks
            .extra
            .as_deref()
            .and_then(|extra| extra.pattern.as_ref()),
        value,
    ) && !pattern.matches(text)
    {
        let source = Value::String(pattern.source.clone());
        report(violations, path, format!("must match the pattern {source}"));
    }
    true
}

/// Whether `value` is one of `allowed` (JSON Schema equality, see [`json_equal`]).
impl Checks {
    /// `value` is not in the `enum`, or is not the `const`.
    fn misses_enum_or_const(&self, value: &Value) -> bool {
        self.allowed
            .as_ref()
            .is_some_and(|allowed| !is_member(allowed, value))
            || self
                .constant
                .as_ref()
                .is_some_and(|constant| !json_equal(constant, value))
    }
}

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
        // Without `additionalItems`, items past the tuple are not checked.
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
            // The quotient overflows an f64 (JSON-Schema-Test-Suite `multipleOf.json`).
            (json!({"multipleOf": 0.123_456_789}), json!(1e308)),
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
            // The quotient overflows an f64 (JSON-Schema-Test-Suite `float-overflow.json`).
            (json!({"multipleOf": 0.5}), json!(1e308)),
            (json!({"multipleOf": 1e-300}), json!(-1e100)),
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
        for (schema, problem) in [
            (json!({"anyOf": []}), "`anyOf` must not be empty"),
            (json!({"allOf": {}}), "`allOf` must be an array"),
            (
                json!({"patternProperties": []}),
                "`patternProperties` must be an object",
            ),
            (
                json!({"dependentRequired": {"a": "b"}}),
                "`dependentRequired` values must be arrays of strings",
            ),
        ] {
            let err = InputSchema::compile(&schema).unwrap_err();
            assert_eq!(err.problem, problem, "{schema}");
        }
    }

    /// `allOf` applies every subschema; `not` refuses what its subschema accepts.
    #[test]
    fn all_of_and_not_are_enforced() {
        let schema = json!({
            "allOf": [{"type": "object", "required": ["a"]}, {"required": ["b"]}],
            "not": {"required": ["c"]},
        });
        assert!(problems(schema.clone(), json!({"a": 1, "b": 2})).is_empty());
        assert_eq!(
            problems(schema.clone(), json!({"b": 2})),
            ["input: missing required property \"a\""]
        );
        assert_eq!(
            problems(schema, json!({"a": 1, "b": 2, "c": 3})),
            ["input: must not match the schema under `not`"]
        );
    }

    /// `anyOf` needs one alternative: when none matches, the report says so and shows the
    /// closest alternative's problems, or sums the alternatives' types up when the value's
    /// type fits none.
    #[test]
    fn any_of_reports_the_closest_alternative() {
        let schema = json!({
            "type": "object",
            "properties": {
                "user": {"anyOf": [
                    {"type": "object", "properties": {"name": {"type": "string"}}},
                    {"type": "null"},
                ]},
            },
        });
        assert!(problems(schema.clone(), json!({"user": null})).is_empty());
        assert!(problems(schema.clone(), json!({"user": {"name": "x"}})).is_empty());
        assert_eq!(
            problems(schema.clone(), json!({"user": 5})),
            ["input.user: matches no alternative of `anyOf`: expected null or object, got number"]
        );
        assert_eq!(
            problems(schema, json!({"user": {"name": 1}})),
            [
                "input.user: matches no alternative of `anyOf`; the closest is alternative 0",
                "input.user.name: expected string, got number",
            ]
        );
    }

    /// `oneOf` needs exactly one alternative, and names them when several match.
    #[test]
    fn one_of_refuses_none_and_several() {
        let schema = json!({"oneOf": [
            {"type": "integer"},
            {"type": "string"},
            {"type": "number", "minimum": 0},
        ]});
        assert!(problems(schema.clone(), json!(-1)).is_empty());
        assert!(problems(schema.clone(), json!("a")).is_empty());
        assert_eq!(
            problems(schema.clone(), json!(1)),
            [
                "input: must match exactly one alternative of `oneOf`, matched 2 alternatives (0 and 2)"
            ]
        );
        assert_eq!(
            problems(json!({"oneOf": [{}, true, {"type": "null"}]}), json!(null)),
            [
                "input: must match exactly one alternative of `oneOf`, matched 3 alternatives (0, 1 and 2)"
            ]
        );
        assert_eq!(
            problems(schema, json!(-0.5)),
            [
                "input: matches no alternative of `oneOf`; the closest is alternative 2",
                "input: must be at least 0, got -0.5"
            ]
        );
    }

    /// Pydantic v2: `Optional[Model]` is `anyOf` of a `$ref` into `$defs` and `null`.
    #[test]
    fn pydantic_optional_nested_model() {
        let schema = json!({
            "$defs": {
                "Address": {
                    "properties": {
                        "city": {"title": "City", "type": "string"},
                        "zip": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                    },
                    "required": ["city"],
                    "title": "Address",
                    "type": "object",
                },
            },
            "properties": {
                "name": {"title": "Name", "type": "string"},
                "address": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}]},
                "tags": {"items": {"$ref": "#/$defs/Address"}, "type": "array"},
            },
            "required": ["name"],
            "title": "Person",
            "type": "object",
        });
        assert!(problems(schema.clone(), json!({"name": "a", "address": null})).is_empty());
        assert!(
            problems(
                schema.clone(),
                json!({"name": "a", "address": {"city": "b", "zip": null}, "tags": [{"city": "c"}]})
            )
            .is_empty()
        );
        assert_eq!(
            problems(schema.clone(), json!({"name": "a", "tags": [{"zip": 1}]})),
            [
                "input.tags[0]: missing required property \"city\"",
                "input.tags[0].zip: matches no alternative of `anyOf`: expected null or string, got number",
            ]
        );
        assert_eq!(
            problems(schema, json!({"name": "a", "address": {"zip": "1"}})),
            [
                "input.address: matches no alternative of `anyOf`; the closest is alternative 0",
                "input.address: missing required property \"city\"",
            ]
        );
        // Older generators (pydantic v1, zod-to-json-schema) use `definitions`.
        let schema = json!({
            "definitions": {"Id": {"type": "integer"}},
            "properties": {"id": {"$ref": "#/definitions/Id"}},
        });
        assert_eq!(
            problems(schema, json!({"id": "1"})),
            ["input.id: expected integer, got string"]
        );
    }

    /// What zod-to-json-schema emits: `anyOf` for unions, `pattern`, and `$ref` to an earlier
    /// property's schema (`#/properties/...`) for a schema used twice.
    #[test]
    fn zod_style_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "from": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
                "to": {"$ref": "#/properties/from"},
                "id": {"anyOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"type": "number"}]},
                "email": {
                    "type": "string",
                    "format": "email",
                    "pattern": "^(?!\\.)(?!.*\\.\\.)([A-Z0-9_'+\\-\\.]*)[A-Z0-9_+-]@([A-Z0-9][A-Z0-9\\-]*\\.)+[A-Z]{2,}$",
                },
            },
            "required": ["from", "to"],
            "additionalProperties": false,
            "$schema": "http://json-schema.org/draft-07/schema#",
        });
        let good = json!({"from": "2024-01-02", "to": "2024-01-03", "id": 7, "email": "whatever"});
        assert!(problems(schema.clone(), good).is_empty());
        assert_eq!(
            problems(
                schema,
                json!({"from": "2024-1-2", "to": "x2024-01-03", "id": "A1"})
            ),
            [
                "input.from: must match the pattern \"^\\\\d{4}-\\\\d{2}-\\\\d{2}$\"",
                "input.to: must match the pattern \"^\\\\d{4}-\\\\d{2}-\\\\d{2}$\"",
                "input.id: matches no alternative of `anyOf`; the closest is alternative 0",
                "input.id: must match the pattern \"^[a-z]+$\"",
            ]
        );
    }

    /// Patterns are unanchored (ECMA-262 `test`), and `\d` and `\w` are ASCII as in ECMA-262.
    #[test]
    fn patterns_are_unanchored_and_ascii_classes() {
        let schema = json!({"pattern": "\\d\\w"});
        assert!(problems(schema.clone(), json!("xx1a")).is_empty());
        assert!(
            problems(schema.clone(), json!(12)).is_empty(),
            "only strings"
        );
        assert_eq!(
            problems(schema.clone(), json!("١a")).len(),
            1,
            "Arabic-Indic digit"
        );
        assert_eq!(problems(json!({"pattern": "[^\\d]"}), json!("1")).len(), 1);
        assert!(problems(json!({"pattern": "[^\\D]"}), json!("1")).is_empty());
        assert!(problems(json!({"pattern": "^\\/[\\w-]+$"}), json!("/a-b")).is_empty());
        let word = json!({"pattern": "\\bcat\\b"});
        assert!(problems(word.clone(), json!("a cat.")).is_empty());
        assert_eq!(problems(word.clone(), json!("concat")).len(), 1);
        // ECMA-262's `\b` is ASCII: `é` is no word character, so `écat` has a boundary.
        assert!(problems(word, json!("écat")).is_empty());
        // ECMA-262's `.` matches no line terminator; inside a class it is a plain dot.
        let dots = json!({"pattern": "^a.b$"});
        assert!(problems(dots.clone(), json!("a-b")).is_empty());
        for terminator in ["a\nb", "a\rb", "a\u{2028}b", "a\u{2029}b"] {
            assert_eq!(
                problems(dots.clone(), json!(terminator)).len(),
                1,
                "{terminator:?}"
            );
        }
        assert!(problems(json!({"pattern": "^[.]$"}), json!(".")).is_empty());
        assert_eq!(problems(json!({"pattern": "^[.]$"}), json!("x")).len(), 1);
        assert!(problems(json!({"pattern": "^a\\.b$"}), json!("a.b")).is_empty());
        assert_eq!(
            problems(json!({"pattern": "^a\\.b$"}), json!("axb")).len(),
            1
        );
        // In ECMA-262 a `[` inside a class is a plain character, not a nested class.
        assert!(problems(json!({"pattern": "^[[a]+$"}), json!("[a[")).is_empty());
        // ECMA-262's `\s` takes U+FEFF and not U+0085 (Unicode's White_Space: the reverse);
        // JSON-Schema-Test-Suite `optional/ecmascript-regex.json`.
        let space = json!({"pattern": "^\\s$"});
        for white in [
            "\u{feff}", " ", "\t", "\u{a0}", "\u{2003}", "\u{2028}", "\u{3000}",
        ] {
            assert!(
                problems(space.clone(), json!(white)).is_empty(),
                "{white:?}"
            );
            assert_eq!(problems(json!({"pattern": "^\\S$"}), json!(white)).len(), 1);
            assert!(problems(json!({"pattern": "^[\\sx]$"}), json!(white)).is_empty());
        }
        assert_eq!(problems(space.clone(), json!("\u{85}")).len(), 1);
        assert_eq!(problems(space, json!("\u{200b}")).len(), 1);
        assert!(problems(json!({"pattern": "^\\S$"}), json!("\u{85}")).is_empty());
        // `\cX` is the control character of the letter X, in either case.
        for pattern in ["^\\cC$", "^\\cc$", "^[\\cC]$"] {
            assert!(problems(json!({"pattern": pattern}), json!("\u{3}")).is_empty());
            assert_eq!(
                problems(json!({"pattern": pattern}), json!("\\cC")).len(),
                1
            );
        }
        // A pattern the engine cannot run (look-around, back-references) is ignored, not
        // refused: the tool still registers.
        assert!(problems(json!({"pattern": "(a)\\1"}), json!("ab")).is_empty());
        assert!(problems(json!({"pattern": "^(?=x)"}), json!("y")).is_empty());
        let err = InputSchema::compile(&json!({"pattern": 1})).unwrap_err();
        assert_eq!(err.problem, "`pattern` must be a string");
    }

    /// `patternProperties` checks the properties whose names match; `additionalProperties`
    /// then applies only to the names neither `properties` nor a pattern covers.
    #[test]
    fn pattern_properties() {
        let schema = json!({
            "properties": {"id": {"type": "integer"}},
            "patternProperties": {"^x-": {"type": "string"}, "-n$": {"type": "number"}},
            "additionalProperties": false,
        });
        assert!(problems(schema.clone(), json!({"id": 1, "x-a": "b", "a-n": 2})).is_empty());
        assert_eq!(
            problems(schema, json!({"x-n": "b", "y": 1})),
            [
                "input.x-n: expected number, got string",
                "input: unexpected property \"y\"",
            ]
        );
        // A pattern the engine cannot run (look-ahead) is not checked, and the names it may
        // cover are not refused as additional either: whether it covers them is unknown.
        let schema = json!({
            "patternProperties": {"^(?!x)": {"type": "string"}, "^x-": {"type": "string"}},
            "additionalProperties": false,
        });
        assert!(problems(schema.clone(), json!({"a": 1, "x-a": "b"})).is_empty());
        assert_eq!(
            problems(schema, json!({"x-a": 1})),
            ["input.x-a: expected string, got number"]
        );
    }

    /// A tree type refers to itself; the depth of the input decides how far it is followed.
    #[test]
    fn recursive_refs() {
        let schema = json!({
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "integer"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    },
                    "required": ["value"],
                },
            },
            "$ref": "#/$defs/Node",
        });
        let mut deep = json!({"value": 0});
        for _ in 0..60 {
            deep = json!({"value": 1, "children": [deep, {"value": 2}]});
        }
        assert!(problems(schema.clone(), deep.clone()).is_empty());
        let bad = json!({"value": 1, "children": [{"value": 2, "children": [{"value": "x"}]}]});
        assert_eq!(
            problems(schema.clone(), bad),
            ["input.children[0].children[0].value: expected integer, got string"]
        );
        // `#` is the whole document.
        let list = json!({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}, "v": {"type": "string"}}});
        let mut input = json!({"v": "end", "next": null});
        for _ in 0..120 {
            input = json!({"v": "x", "next": input});
        }
        assert!(problems(list.clone(), input).is_empty());
        assert_eq!(
            problems(list, json!({"next": {"next": {"v": 1}}})),
            [
                "input.next: matches no alternative of `anyOf`; the closest is alternative 0",
                "input.next.next: matches no alternative of `anyOf`; the closest is alternative 0",
                "input.next.next.v: expected string, got number",
            ]
        );
    }

    /// A subschema with an `$id` of its own is a resource: a fragment `$ref` inside it names a
    /// place in it, not in the document (JSON-Schema-Test-Suite `ref.json`, "refs with relative
    /// uris and defs": the schema was refused as `#/$defs/inner` is not in the document root).
    #[test]
    fn refs_resolve_in_the_nested_resource() {
        let schema = json!({
            "$id": "http://example.com/root.json",
            "$defs": {"inner": {"type": "integer"}},
            "properties": {
                "foo": {
                    "$id": "foo.json",
                    "$defs": {"inner": {"properties": {"bar": {"type": "string"}}}},
                    "$ref": "#/$defs/inner"
                },
                "whole": {"$id": "whole.json", "type": "array", "items": {"$ref": "#"}},
                "root": {"$id": "other.json", "$ref": "http://example.com/root.json#/$defs/inner"},
                "via": {"$ref": "#/properties/foo"}
            }
        });
        assert!(problems(schema.clone(), json!({"foo": {"bar": "a"}, "root": 1})).is_empty());
        assert_eq!(
            problems(schema.clone(), json!({"foo": {"bar": 1}})),
            ["input.foo.bar: expected string, got number"]
        );
        assert_eq!(
            problems(schema.clone(), json!({"root": "x"})),
            ["input.root: expected integer, got string"]
        );
        // Reached through a `$ref` from outside, the resource's own fragments still resolve in it.
        assert_eq!(
            problems(schema.clone(), json!({"via": {"bar": 1}})),
            ["input.via.bar: expected string, got number"]
        );
        assert!(problems(schema.clone(), json!({"whole": [[], [[]]]})).is_empty());
        assert_eq!(problems(schema, json!({"whole": [1]})).len(), 1);
        // A fragment the nested resource lacks does not resolve, even where the document has it.
        let err = InputSchema::compile(&json!({
            "$defs": {"a": true},
            "properties": {"x": {"$id": "x.json", "$ref": "#/$defs/a"}}
        }))
        .unwrap_err();
        assert_eq!(err.path, "/properties/x");
        // A draft-07 `"$id": "#name"` is an anchor, not a resource.
        assert!(
            InputSchema::compile(&json!({
                "$defs": {"a": true},
                "properties": {"x": {"$id": "#x", "$ref": "#/$defs/a"}}
            }))
            .is_ok()
        );
    }

    /// JSON pointers: `~1` is `/`, `~0` is `~`, and the fragment is percent-decoded; a pointer
    /// may go through arrays.
    #[test]
    fn ref_pointers_are_unescaped() {
        let schema = json!({
            "$defs": {"a/b": {"type": "string"}, "m~n": {"type": "integer"}, "sp ace": {"type": "null"}},
            "anyOf": [{"type": "boolean"}, {"minimum": 3}],
            "properties": {
                "x": {"$ref": "#/$defs/a~1b"},
                "y": {"$ref": "#/$defs/m~0n"},
                "z": {"$ref": "#/$defs/sp%20ace"},
                "w": {"$ref": "#/anyOf/1"},
                "v": {"$ref": "#/%24defs/a~1b"},
            },
        });
        assert!(
            problems(
                schema.clone(),
                json!({"x": "s", "y": 1, "z": null, "w": 4, "v": "t"})
            )
            .is_empty()
        );
        assert_eq!(
            problems(schema, json!({"x": 1, "y": "s", "z": 0, "w": 2, "v": 1})),
            [
                "input.x: expected string, got number",
                "input.y: expected integer, got string",
                "input.z: expected null, got number",
                "input.w: must be at least 3, got 2",
                "input.v: expected string, got number",
            ]
        );
    }

    /// A `$ref` that resolves to nothing cannot be checked: registration fails naming it.
    #[test]
    fn unresolvable_refs_are_refused() {
        for (schema, path, problem) in [
            (
                json!({"properties": {"a": {"$ref": "#/$defs/Missing"}}}),
                "/properties/a",
                "`$ref` \"#/$defs/Missing\" does not resolve in this schema",
            ),
            (
                json!({"$ref": "#/items/5", "items": []}),
                "/",
                "`$ref` \"#/items/5\" does not resolve in this schema",
            ),
            (
                json!({"$ref": "#/$defs/%zz"}),
                "/",
                "`$ref` \"#/$defs/%zz\" is not a valid URI fragment",
            ),
            (json!({"$ref": 5}), "/", "`$ref` must be a string"),
            (
                json!({"$defs": {"A": {"type": "nope"}}, "$ref": "#/$defs/A"}),
                "/$defs/A",
                "unknown type `nope`",
            ),
        ] {
            let err = InputSchema::compile(&schema).unwrap_err();
            assert_eq!(
                (err.path.as_str(), err.problem.as_str()),
                (path, problem),
                "{schema}"
            );
        }
        // An unused definition is not compiled, as JSON Schema does not apply it.
        assert!(InputSchema::compile(&json!({"$defs": {"A": {"$ref": "#/nowhere"}}})).is_ok());
    }

    /// A remote `$ref` (another document) is not fetched: it is ignored, like a pattern the
    /// engine cannot run; a `$ref` to the document's own `$id` is local.
    #[test]
    fn remote_refs_are_ignored() {
        let schema = json!({"properties": {"a": {"$ref": "https://example.com/a.json#/x"}, "b": {"$ref": "other.json"}}});
        assert!(problems(schema, json!({"a": 1, "b": 2})).is_empty());
        let schema = json!({
            "$id": "https://example.com/tool.json",
            "$defs": {"A": {"type": "string"}},
            "properties": {"a": {"$ref": "https://example.com/tool.json#/$defs/A"}},
        });
        assert_eq!(
            problems(schema, json!({"a": 1})),
            ["input.a: expected string, got number"]
        );
    }

    /// A schema that is only a cycle of references says nothing about any value, and
    /// following it would never end: refused at registration, naming the cycle.
    #[test]
    fn ref_cycles_are_refused() {
        let err = InputSchema::compile(&json!({"$ref": "#"})).unwrap_err();
        assert_eq!(
            err.problem,
            "`$ref` cycle that never reaches a value's contents: # -> #"
        );
        let err = InputSchema::compile(&json!({
            "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"allOf": [{"$ref": "#/$defs/A"}]}},
            "properties": {"x": {"$ref": "#/$defs/A"}},
        }))
        .unwrap_err();
        assert_eq!(
            err.problem,
            "`$ref` cycle that never reaches a value's contents: #/$defs/A -> #/$defs/B -> #/$defs/A"
        );
        // A cycle through `properties` or `items` descends into the input each time round.
        assert!(InputSchema::compile(&json!({"items": {"$ref": "#"}})).is_ok());
    }

    /// A recursive union (an expression tree) is checked in time linear in the input: each
    /// shared definition is applied to each value once, however many alternatives reach it.
    #[test]
    fn recursive_unions_stay_linear() {
        let schema = json!({
            "$defs": {"E": {"oneOf": [
                {"type": "object", "properties": {"op": {"const": "add"}, "l": {"$ref": "#/$defs/E"}, "r": {"$ref": "#/$defs/E"}}, "required": ["op"]},
                {"type": "object", "properties": {"op": {"const": "mul"}, "l": {"$ref": "#/$defs/E"}, "r": {"$ref": "#/$defs/E"}}, "required": ["op"]},
                {"type": "integer"},
            ]}},
            "$ref": "#/$defs/E",
        });
        let schema = InputSchema::compile(&schema).unwrap();
        let mut input = json!(1);
        for _ in 0..100 {
            // The operand before the tag: each alternative walks it before the tag refuses.
            input = json!({"l": input, "r": 2, "op": "add"});
        }
        // Without sharing, 2^100 walks: this would not finish.
        assert!(schema.validate(&input).is_ok());
        let mut bad = json!("x");
        for _ in 0..100 {
            bad = json!({"l": bad, "r": 2, "op": "mul"});
        }
        assert!(schema.validate(&bad).is_err());
    }

    /// `if`/`then`/`else`, `dependentRequired` and draft-07 `dependencies`.
    #[test]
    fn conditionals_and_dependencies() {
        let schema = json!({
            "if": {"properties": {"kind": {"const": "file"}}, "required": ["kind"]},
            "then": {"required": ["path"]},
            "else": {"required": ["url"]},
            "dependentRequired": {"start": ["end"]},
            "dependencies": {"a": ["b"], "c": {"required": ["d"]}},
        });
        assert!(problems(schema.clone(), json!({"kind": "file", "path": "p"})).is_empty());
        assert!(problems(schema.clone(), json!({"url": "u", "start": 1, "end": 2})).is_empty());
        assert_eq!(
            problems(
                schema.clone(),
                json!({"kind": "file", "url": "u", "start": 1})
            ),
            [
                "input: missing required property \"path\"",
                "input: property \"end\" is required when \"start\" is present",
            ]
        );
        assert_eq!(
            problems(schema, json!({"url": "u", "a": 1, "c": 2})),
            [
                "input: property \"b\" is required when \"a\" is present",
                "input: missing required property \"d\"",
            ]
        );
    }

    /// An input deeper than [`MAX_DEPTH`] schema steps is refused, not walked until the stack
    /// runs out; within it, a deep input through a recursive schema passes. Run on a thread
    /// with a small stack, as a bound on what the walks use (debug build frames).
    #[test]
    fn deep_walks_are_bounded() {
        let check = || {
            let schema = InputSchema::compile(&json!({"items": {"$ref": "#"}})).unwrap();
            let mut deep = json!([]);
            for _ in 0..127 {
                deep = json!([deep]);
            }
            assert!(schema.validate(&deep).is_ok());
            let mut deeper = json!([]);
            for _ in 0..MAX_DEPTH {
                deeper = Value::Array(vec![deeper]);
            }
            let problems: Vec<String> = match schema.validate(&deeper) {
                Ok(()) => Vec::new(),
                Err(violations) => violations.iter().map(ToString::to_string).collect(),
            };
            assert_eq!(
                problems,
                ["input: nested too deeply to check against this tool's schema"]
            );
            // Masked by an alternative that accepts anything, the depth still refuses: part
            // of the input went unchecked.
            let schema =
                InputSchema::compile(&json!({"anyOf": [{"items": {"$ref": "#"}}, {}]})).unwrap();
            assert!(schema.validate(&deeper).is_err());
            // The reporting walk goes deeper than the check, which stopped at `a`: it stops at
            // the same depth, within the same stack.
            let schema = InputSchema::compile(&json!({
                "properties": {"a": false, "b": {"items": {"$ref": "#/properties/b"}}},
            }))
            .unwrap();
            let input = json!({"a": 1, "b": deeper});
            let problems: Vec<String> = match schema.validate(&input) {
                Ok(()) => Vec::new(),
                Err(violations) => violations.iter().map(ToString::to_string).collect(),
            };
            assert_eq!(problems, ["input.a: no value is allowed here"]);
            let Value::Object(mut input) = input else {
                unreachable!()
            };
            let deeper = input.remove("b").unwrap_or(Value::Null);
            // serde_json drops nested arrays recursively; unwound here to keep the stack small.
            let mut value = deeper;
            while let Value::Array(mut items) = value {
                value = items.pop().unwrap_or(Value::Null);
            }
        };
        std::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(check)
            .unwrap()
            .join()
            .unwrap();
    }

    /// Draft-07 `additionalItems` (what zod-to-json-schema emits for a tuple's `.rest()`),
    /// `contains` with `minContains`/`maxContains`, and `propertyNames`.
    #[test]
    fn additional_items_contains_and_property_names() {
        let schema = json!({"items": [{"type": "string"}], "additionalItems": {"type": "integer"}});
        assert!(problems(schema.clone(), json!(["a", 1, 2])).is_empty());
        assert_eq!(
            problems(schema, json!(["a", 1, "b"])),
            ["input[2]: expected integer, got string"]
        );
        // Beside a single `items` schema, `additionalItems` means nothing.
        assert!(problems(json!({"items": {}, "additionalItems": false}), json!([1])).is_empty());
        let schema = json!({"contains": {"type": "string"}, "maxContains": 2});
        assert!(problems(schema.clone(), json!([1, "a"])).is_empty());
        assert!(problems(schema.clone(), json!({"not": "an array"})).is_empty());
        assert_eq!(
            problems(schema.clone(), json!([1, 2])),
            ["input: must contain at least 1 item matching `contains`, got 0"]
        );
        assert_eq!(
            problems(schema, json!(["a", "b", "c"])),
            ["input: must contain at most 2 items matching `contains`, got 3"]
        );
        assert!(
            problems(
                json!({"contains": {"type": "string"}, "minContains": 0}),
                json!([1])
            )
            .is_empty()
        );
        let schema = json!({"propertyNames": {"pattern": "^[a-z_]+$", "maxLength": 4}});
        assert!(problems(schema.clone(), json!({"ab_c": 1})).is_empty());
        assert_eq!(
            problems(schema, json!({"Ab": 1, "abcde": 2})),
            [
                "input: property name \"Ab\": must match the pattern \"^[a-z_]+$\"",
                "input: property name \"abcde\": must have at most 4 characters, got 5",
            ]
        );
    }

    /// Counts the `WARN` events emitted while it is the default subscriber.
    #[derive(Default)]
    struct WarnCounter(std::sync::atomic::AtomicUsize);

    impl tracing::Subscriber for &'static WarnCounter {
        fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            if *event.metadata().level() == tracing::Level::WARN {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }

    /// What is not checked is said once, when the schema is compiled, not per input: one
    /// warning per unsupported pattern or remote `$ref`, even when several `$ref`s share it.
    #[test]
    fn ignored_keywords_warn_once_at_compile_time() {
        let counter: &'static WarnCounter = Box::leak(Box::default());
        let warnings = || counter.0.load(std::sync::atomic::Ordering::SeqCst);
        tracing::subscriber::with_default(counter, || {
            let schema = InputSchema::compile(&json!({
                "$defs": {"Mail": {"type": "string", "pattern": "^(?!\\.)[^@]+@[^@]+$"}},
                "properties": {
                    "from": {"$ref": "#/$defs/Mail"},
                    "to": {"type": "array", "items": {"$ref": "#/$defs/Mail"}},
                    "remote": {"$ref": "https://example.com/schema.json"},
                },
            }))
            .unwrap();
            assert_eq!(warnings(), 2);
            let input = json!({"from": ".a@b", "to": ["c@d", "e"], "remote": 1});
            assert!(schema.validate(&input).is_ok());
            assert_eq!(warnings(), 2);
            assert!(InputSchema::compile(&json!({"pattern": "^a+$"})).is_ok());
            assert_eq!(warnings(), 2);
        });
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
            let mut walk = Walk::default();
            schema.check(&schema.root, &input, &mut String::from("input"), &mut violations, &mut walk);
            let conforming = schema.conforms(&schema.root, &input, &mut Walk::default());
            proptest::prop_assert_eq!(conforming, violations.is_empty());
            proptest::prop_assert_eq!(schema.validate(&input).is_ok(), violations.is_empty());
        }
    }

    proptest::proptest! {
        /// The same for the applicators, references (a shared, recursive one among them) and
        /// patterns.
        #[test]
        fn fast_and_reporting_walks_agree_on_applicators(input in arbitrary_json()) {
            let schema = InputSchema::compile(&json!({
                "$defs": {"Name": {"maxLength": 6}, "T": {"anyOf": [
                    {"type": "string", "pattern": "^r"},
                    {"type": "array", "items": {"$ref": "#/$defs/T"}, "maxItems": 2},
                    {"type": "null"},
                ]}},
                "type": "object",
                "properties": {
                    "path": {"$ref": "#/$defs/T"},
                    "mode": {"oneOf": [{"type": "string"}, {"enum": ["read", 2]}, {"type": "integer"}]},
                    "tags": {"allOf": [{"type": "array"}, {"not": {"items": {"type": "boolean"}}}],
                             "contains": {"type": "string"}, "maxContains": 1},
                    "n": {"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": ["string", "object"]}},
                    "pair": {"$ref": "#"},
                },
                "patternProperties": {"^r": {"type": ["array", "null"]}},
                "propertyNames": {"anyOf": [{"$ref": "#/$defs/Name"}, {"$ref": "#/$defs/Name", "minLength": 7}]},
                "dependentRequired": {"mode": ["path"]},
                "dependencies": {"n": {"required": ["tags"]}},
                "additionalProperties": {"$ref": "#/properties/n"},
            }))
            .unwrap();
            let mut violations = Vec::new();
            let mut walk = Walk::default();
            schema.check(&schema.root, &input, &mut String::from("input"), &mut violations, &mut walk);
            let conforming = schema.conforms(&schema.root, &input, &mut Walk::default());
            proptest::prop_assert_eq!(conforming, violations.is_empty());
            proptest::prop_assert_eq!(schema.validate(&input).is_ok(), violations.is_empty());
        }
    }

    /// Small schemas built from the applicators and references, to any shape the generator
    /// reaches (cycles included).
    fn arbitrary_schema() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(json!(true)),
            Just(json!(false)),
            Just(json!({"type": "string"})),
            Just(json!({"type": ["object", "null"]})),
            Just(json!({"minimum": 0})),
            Just(json!({"required": ["path"]})),
            prop_oneof![
                Just("#"),
                Just("#/$defs/a"),
                Just("#/$defs/b"),
                Just("#/properties/path"),
                Just("#/anyOf/0"),
                Just("#/allOf/1"),
            ]
            .prop_map(|target| json!({"$ref": target})),
        ];
        leaf.prop_recursive(4, 32, 3, |inner| {
            let keyword = prop_oneof![
                Just("anyOf"),
                Just("allOf"),
                Just("oneOf"),
                Just("not"),
                Just("properties"),
                Just("items"),
                Just("if"),
                Just("then"),
            ];
            proptest::collection::vec((keyword, proptest::collection::vec(inner, 1..3)), 1..3)
                .prop_map(|pairs| {
                    let mut object = Map::new();
                    for (keyword, mut schemas) in pairs {
                        let value = match keyword {
                            "anyOf" | "allOf" | "oneOf" => Value::Array(schemas),
                            "properties" => {
                                json!({"path": schemas.remove(0), "mode": schemas.pop()})
                            }
                            _ => schemas.remove(0),
                        };
                        object.insert(keyword.to_owned(), value);
                    }
                    Value::Object(object)
                })
        })
        .prop_flat_map(|root| {
            (Just(root), proptest::collection::vec(any::<bool>(), 2)).prop_map(
                |(mut root, defs)| {
                    if let Value::Object(object) = &mut root {
                        let pick = |flag: bool| {
                            if flag {
                                json!({"$ref": "#/$defs/b"})
                            } else {
                                json!({"items": {"$ref": "#/$defs/a"}})
                            }
                        };
                        object.insert(
                            "$defs".to_owned(),
                            json!({"a": pick(defs[0]), "b": pick(defs[1])}),
                        );
                    }
                    root
                },
            )
        })
    }

    proptest::proptest! {
        // Most generated schemas name something absent and are refused: more cases, so that
        // a few hundred compiled ones with references are walked.
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// Whatever the schema: compiling it ends (an error for a bare cycle or a pointer to
        /// nothing), and a compiled one validates any input without looping, overflowing or
        /// the two walks disagreeing.
        #[test]
        fn any_schema_compiles_or_is_refused_and_walks_agree(
            schema in arbitrary_schema(),
            input in arbitrary_json(),
        ) {
            let Ok(schema) = InputSchema::compile(&schema) else {
                return Ok(());
            };
            let mut walk = Walk::default();
            let conforming = schema.conforms(&schema.root, &input, &mut walk);
            let mut violations = Vec::new();
            schema.check(&schema.root, &input, &mut String::from("input"), &mut violations, &mut Walk::default());
            proptest::prop_assert!(!walk.too_deep);
            proptest::prop_assert_eq!(conforming, violations.is_empty());
            proptest::prop_assert_eq!(schema.validate(&input).is_ok(), conforming);
        }
    }

    #[test]
    fn trivial_schema_compiles_to_any() {
        let schema = InputSchema::compile(&json!({"description": "x"})).unwrap();
        assert_eq!(schema, InputSchema::any());
    }
}
