//! Every exported function runs its body behind the panic boundary (`boundary::run`, `quiet` or
//! `run_void`), so that no Rust panic unwinds into C. The few that cannot panic (they return a
//! constant) are listed by name: a new entry point without the boundary fails here.

use std::path::Path;

/// Exported functions with no boundary: each only builds or returns a constant.
const NO_BOUNDARY: &[&str] = &[
    "fl_version",
    "fl_executor_options_default",
    "fl_tool_options_default",
    "fl_context_budget_options_default",
];

/// The name and body of every `#[unsafe(no_mangle)]` function of `source`.
fn exported_functions(source: &str) -> Vec<(String, String)> {
    let mut functions = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("#[unsafe(no_mangle)]") {
        rest = &rest[at + "#[unsafe(no_mangle)]".len()..];
        let Some(fn_at) = rest.find(" fn ") else {
            break;
        };
        let name: String = rest[fn_at + 4..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // A signature holds no brace: the body starts at the first one.
        let Some(body_start) = rest[fn_at..].find('{').map(|i| fn_at + i) else {
            break;
        };
        let body_end = rest[body_start..]
            .find("\n}\n")
            .map_or(rest.len(), |i| body_start + i);
        functions.push((name, rest[body_start..body_end].to_owned()));
        rest = &rest[body_end..];
    }
    functions
}

#[test]
fn every_entry_point_is_behind_the_panic_boundary() -> Result<(), Box<dyn std::error::Error>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut checked = 0;
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&src)? {
        let path = entry?.path();
        if path.extension().is_none_or(|ext| ext != "rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path)?;
        for (name, body) in exported_functions(&source) {
            checked += 1;
            if NO_BOUNDARY.contains(&name.as_str()) {
                continue;
            }
            let guarded = ["boundary::run(", "boundary::quiet(", "boundary::run_void("]
                .iter()
                .any(|call| body.contains(call))
                // boundary.rs calls its own helpers unqualified.
                || body.contains("quiet(|| {");
            if !guarded {
                missing.push(format!("{name} ({})", path.display()));
            }
        }
    }
    assert!(checked >= 60, "only {checked} exported functions found");
    assert!(
        missing.is_empty(),
        "exported functions without the panic boundary: {missing:?}"
    );
    Ok(())
}
