//! The tool interface: what the executor needs to know about a tool and how it calls it.
//!
//! The executor only sees boxed futures, so a tool may be Rust code or a host function (a
//! Python coroutine, a JS promise, a C callback) wrapped by a binding.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::context::ToolContext;
use super::schema::{InputSchema, SchemaError};
use super::types::ToolResultContent;

/// What a tool produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The content the model reads.
    pub content: ToolResultContent,
    /// Whether the output reports a failure (counts as an error for sibling cancellation).
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful text output.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: ToolResultContent::Text(text.into()),
            is_error: false,
        }
    }

    /// A successful output made of content blocks (objects with a string `type`). A list
    /// holding anything else is sent as its JSON text: the providers refuse it as content.
    pub fn blocks(blocks: Vec<Value>) -> Self {
        Self {
            content: ToolResultContent::Blocks(blocks),
            is_error: false,
        }
    }

    /// An error output (the tool ran and reports failure in its own words).
    pub fn error(content: impl Into<ToolResultContent>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
        }
    }
}

/// A tool failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The call failed: the model gets an error result with this message and the turn goes on.
    #[error("{0}")]
    Failed(String),
    /// The call failed in a way that must end the turn: the model gets an error result with
    /// this message, calls not yet started get synthetic results, running calls are cancelled,
    /// and the turn reports [`TurnError::Fatal`](super::TurnError::Fatal).
    #[error("{0}")]
    Fatal(String),
}

impl ToolError {
    /// A recoverable failure.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// A failure that ends the turn.
    pub fn fatal(message: impl Into<String>) -> Self {
        Self::Fatal(message.into())
    }
}

/// How large a tool's result may be before it is spilled to a file. The executor's own timeout
/// and cancellation messages are delivered whole whatever the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResultLimit {
    /// The executor's default (50,000 characters unless configured).
    #[default]
    Default,
    /// At most this many characters.
    Chars(usize),
    /// Never spilled by the per-tool limit (the per-turn budget still applies).
    Unlimited,
}

/// The future a tool call returns.
pub type ToolFuture = BoxFuture<'static, Result<ToolOutput, ToolError>>;

/// A tool. Implement it in Rust, or wrap a host function with [`FnTool`].
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls the tool by.
    fn name(&self) -> &str;

    /// What the tool does, for the model (sent in the request's tool definitions).
    fn description(&self) -> &str {
        ""
    }

    /// The JSON schema of the input (default: any object).
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }

    /// Whether this call may run beside other safe calls (default: no, it runs alone).
    fn is_concurrency_safe(&self, _input: &Value) -> bool {
        false
    }

    /// How long a call may run (default: the executor's default timeout, none unless set),
    /// counted from the moment the tool is handed the call: time spent in [`call`](Self::call)
    /// itself, or blocking before its future first returns, counts too, and an answer that comes
    /// only after the limit (a tool that blocked its thread past it) is a timeout.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// The size limit of a result before it is spilled to a file.
    fn max_result_chars(&self) -> ResultLimit {
        ResultLimit::Default
    }

    /// Whether a failure of this tool cancels its running siblings and the calls queued after it
    /// (the shell-tool behaviour: later commands assumed this one succeeded).
    fn cancels_siblings_on_error(&self) -> bool {
        false
    }

    /// Whether the host runs this tool's calls itself, answering them through the turn, when the
    /// turn allows it ([`Turn::enable_external_calls`](super::Turn::enable_external_calls));
    /// [`call`](Self::call) is still used for calls that need a future: with hooks, a timeout,
    /// or on a task of their own, and for every call in turns that do not allow it (an
    /// agent's). Such a future must wait for the host's answer alone: no timer or task of its
    /// own wakes it, so a turn running only such calls
    /// [waits only on its host](super::Turn::waits_only_on_host). Default: no.
    fn is_externally_completed(&self) -> bool {
        false
    }

    /// Starts a call. The future runs on the executor's task (or a task of its own when
    /// [`ExecutorConfig::spawn_calls`](super::ExecutorConfig::spawn_calls) is set); CPU-heavy
    /// work belongs on `spawn_blocking` or a host thread.
    fn call(&self, input: Value, ctx: ToolContext) -> ToolFuture;
}

/// Whether a call of `tool` with `input` may run beside other safe calls, as the executor and
/// the agent's loop decide it: a panicking predicate answers no, the conservative choice (the
/// call then runs alone).
pub(crate) fn decide_concurrency_safe(tool: &dyn Tool, input: &Value) -> bool {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        tool.is_concurrency_safe(input)
    }))
    .unwrap_or(false)
}

type SafetyFn = dyn Fn(&Value) -> bool + Send + Sync;

enum Safety {
    Fixed(bool),
    PerInput(Box<SafetyFn>),
}

/// A tool built from a closure `(input, ctx) -> future`.
///
/// ```
/// use ferroloop::exec::{FnTool, ToolOutput};
/// let echo = FnTool::new("echo", |input, _ctx| async move {
///     Ok(ToolOutput::text(input.to_string()))
/// })
/// .concurrency_safe(true);
/// # let _ = echo;
/// ```
pub struct FnTool<F> {
    name: String,
    description: String,
    schema: Value,
    safety: Safety,
    timeout: Option<Duration>,
    limit: ResultLimit,
    cancels_siblings: bool,
    call: F,
}

impl<F> fmt::Debug for FnTool<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<F, Fut> FnTool<F>
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
{
    /// A tool named `name` whose calls run `call`; not concurrency-safe, any object input.
    pub fn new(name: impl Into<String>, call: F) -> Self {
        Self {
            name: name.into(),
            description: String::new(),
            schema: json!({"type": "object"}),
            safety: Safety::Fixed(false),
            timeout: None,
            limit: ResultLimit::Default,
            cancels_siblings: false,
            call,
        }
    }

    /// Sets the description sent to the model.
    pub fn describe(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Sets the input schema.
    pub fn schema(mut self, schema: Value) -> Self {
        self.schema = schema;
        self
    }

    /// Makes every call safe (or unsafe) to run beside other safe calls.
    pub fn concurrency_safe(mut self, safe: bool) -> Self {
        self.safety = Safety::Fixed(safe);
        self
    }

    /// Decides per input whether a call is safe to run beside other safe calls.
    pub fn safe_when(mut self, decide: impl Fn(&Value) -> bool + Send + Sync + 'static) -> Self {
        self.safety = Safety::PerInput(Box::new(decide));
        self
    }

    /// Sets the timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the result size limit.
    pub fn with_result_limit(mut self, limit: ResultLimit) -> Self {
        self.limit = limit;
        self
    }

    /// Makes a failure cancel the running siblings and the calls queued after it.
    pub fn with_sibling_cancellation(mut self, cancels: bool) -> Self {
        self.cancels_siblings = cancels;
        self
    }
}

impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn is_concurrency_safe(&self, input: &Value) -> bool {
        match &self.safety {
            Safety::Fixed(safe) => *safe,
            Safety::PerInput(decide) => decide(input),
        }
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn max_result_chars(&self) -> ResultLimit {
        self.limit
    }

    fn cancels_siblings_on_error(&self) -> bool {
        self.cancels_siblings
    }

    fn call(&self, input: Value, ctx: ToolContext) -> ToolFuture {
        Box::pin((self.call)(input, ctx))
    }
}

/// A registered tool with its compiled schema and its settings read once.
pub(crate) struct RegisteredTool {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) schema: InputSchema,
    pub(crate) timeout: Option<Duration>,
    pub(crate) limit: ResultLimit,
    pub(crate) cancels_siblings: bool,
}

impl RegisteredTool {
    pub(crate) fn name(&self) -> &str {
        self.tool.name()
    }
}

/// An error registering a tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// The tool's name is empty: a model cannot call it, and a provider refuses a request that
    /// declares it (both APIs require a non-empty name).
    #[error("a tool name must not be empty")]
    EmptyName,
    /// Two tools share a name.
    #[error("a tool named '{0}' is already registered")]
    Duplicate(String),
    /// The tool's timeout is zero: every call would time out at once, where 0 most likely
    /// meant "none" (leave the timeout out for none). The bindings map it to an error naming
    /// their own option; a client's zero timeout is refused the same way.
    #[error(
        "tool '{0}': a timeout of 0 would time out every call at once; give a positive one, or none"
    )]
    ZeroTimeout(String),
    /// The tool's input schema does not compile.
    #[error("tool '{tool}': {source}")]
    Schema {
        /// The tool.
        tool: String,
        /// The schema problem.
        #[source]
        source: SchemaError,
    },
}

/// The tools an executor can call, by name.
#[derive(Default, Clone)]
pub struct ToolRegistry {
    tools: HashMap<String, Arc<RegisteredTool>>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
        names.sort_unstable();
        f.debug_struct("ToolRegistry")
            .field("tools", &names)
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool; its schema is compiled now and its settings read once.
    pub fn register(&mut self, tool: impl Tool) -> Result<&mut Self, RegistryError> {
        self.register_arc(Arc::new(tool))
    }

    /// Registers a shared tool (for example one implemented by a host binding).
    pub fn register_arc(&mut self, tool: Arc<dyn Tool>) -> Result<&mut Self, RegistryError> {
        let name = tool.name().to_owned();
        if name.is_empty() {
            return Err(RegistryError::EmptyName);
        }
        if self.tools.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        if tool.timeout().is_some_and(|timeout| timeout.is_zero()) {
            return Err(RegistryError::ZeroTimeout(name));
        }
        let schema =
            InputSchema::compile(&tool.input_schema()).map_err(|source| RegistryError::Schema {
                tool: name.clone(),
                source,
            })?;
        let registered = RegisteredTool {
            timeout: tool.timeout(),
            limit: tool.max_result_chars(),
            cancels_siblings: tool.cancels_siblings_on_error(),
            schema,
            tool,
        };
        self.tools.insert(name, Arc::new(registered));
        Ok(self)
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name).map(|registered| &registered.tool)
    }

    pub(crate) fn lookup(&self, name: &str) -> Option<&Arc<RegisteredTool>> {
        self.tools.get(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.tools.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::exec::cancel::CancellationToken;

    #[test]
    fn fn_tool_settings_and_call() {
        let tool = FnTool::new("echo", |input, ctx: ToolContext| async move {
            Ok(ToolOutput::text(format!("{}:{input}", ctx.tool_use_id())))
        })
        .safe_when(|input| input.get("read_only") == Some(&Value::Bool(true)))
        .with_timeout(Duration::from_secs(3))
        .with_result_limit(ResultLimit::Unlimited)
        .with_sibling_cancellation(true);
        assert!(tool.is_concurrency_safe(&json!({"read_only": true})));
        assert!(!tool.is_concurrency_safe(&json!({})));
        assert_eq!(tool.timeout(), Some(Duration::from_secs(3)));
        assert_eq!(tool.max_result_chars(), ResultLimit::Unlimited);
        assert!(tool.cancels_siblings_on_error());
        let ctx = ToolContext::standalone("t1", CancellationToken::new());
        let out = futures_util::FutureExt::now_or_never(tool.call(json!(1), ctx)).unwrap();
        assert_eq!(out, Ok(ToolOutput::text("t1:1")));
    }

    #[test]
    fn registry_rejects_duplicates_and_bad_schemas() {
        let mut registry = ToolRegistry::new();
        let make = |name: &str| FnTool::new(name, |_, _| async { Ok(ToolOutput::text("")) });
        registry.register(make("a")).unwrap();
        assert_eq!(
            registry.register(make("a")).err(),
            Some(RegistryError::Duplicate("a".into()))
        );
        let bad = make("b").schema(json!({"type": 7}));
        assert!(matches!(
            registry.register(bad),
            Err(RegistryError::Schema { .. })
        ));
        let instant = make("c").with_timeout(Duration::ZERO);
        assert_eq!(
            registry.register(instant).err(),
            Some(RegistryError::ZeroTimeout("c".into()))
        );
        assert_eq!(
            registry.register(make("")).err(),
            Some(RegistryError::EmptyName)
        );
        assert_eq!(registry.names(), ["a"]);
        assert!(registry.get("a").is_some() && registry.get("b").is_none());
    }
}
