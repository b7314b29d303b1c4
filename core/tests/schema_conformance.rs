//! The tool-input validator (`ferroloop::exec::InputSchema`) against the official
//! JSON-Schema-Test-Suite (`tests/json-schema-test-suite/`, see its README), drafts 2020-12 and
//! 7: every case of the files for the keywords the validator checks is compiled with
//! `InputSchema::compile`, validated, and the verdict compared to the suite's `valid`.
//!
//! Cases that exercise what the validator documents as not checked (remote references, anchors,
//! `$id` base changes, `$dynamicRef`, `unevaluated*`, `format`, draft-07's `$ref` overriding
//! its siblings, ECMA-262-only regex syntax) are listed in [`EXCLUDED`] with the reason; every
//! other case must agree with the suite, and the test prints each one that does not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use ferroloop::exec::InputSchema;
use serde_json::Value;

use common::read_shared;

/// The files run, per draft directory.
const DRAFT2020_12: &[&str] = &[
    "additionalProperties",
    "allOf",
    "anyOf",
    "boolean_schema",
    "const",
    "contains",
    "default",
    "dependentRequired",
    "dependentSchemas",
    "enum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "if-then-else",
    "infinite-loop-detection",
    "items",
    "maxContains",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minContains",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "not",
    "oneOf",
    "pattern",
    "patternProperties",
    "prefixItems",
    "properties",
    "propertyNames",
    "ref",
    "required",
    "type",
    "uniqueItems",
    "optional/bignum",
    "optional/dependencies-compatibility",
    "optional/ecmascript-regex",
    "optional/float-overflow",
    "optional/id",
    "optional/no-schema",
    "optional/non-bmp-regex",
    "optional/refOfUnknownKeyword",
    "optional/unknownKeyword",
];

const DRAFT7: &[&str] = &[
    "additionalItems",
    "additionalProperties",
    "allOf",
    "anyOf",
    "boolean_schema",
    "const",
    "contains",
    "default",
    "dependencies",
    "enum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "if-then-else",
    "infinite-loop-detection",
    "items",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "not",
    "oneOf",
    "pattern",
    "patternProperties",
    "properties",
    "propertyNames",
    "ref",
    "required",
    "type",
    "uniqueItems",
    "optional/bignum",
    "optional/ecmascript-regex",
    "optional/float-overflow",
    "optional/id",
    "optional/non-bmp-regex",
    "optional/unknownKeyword",
];

/// A case excluded, with the reason: what the validator documents as not checked.
struct Exclusion {
    draft: &'static str,
    file: &'static str,
    group: &'static str,
    test: &'static str,
    reason: &'static str,
}

const fn one(
    draft: &'static str,
    file: &'static str,
    group: &'static str,
    test: &'static str,
    reason: &'static str,
) -> Exclusion {
    Exclusion {
        draft,
        file,
        group,
        test,
        reason,
    }
}

const UNEVALUATED: &str = "`unevaluatedProperties` and `unevaluatedItems` are not checked";
const REMOTE: &str = "a `$ref` to another document (here the meta-schema) is not fetched";
const RELATIVE: &str = "a `$ref` by a URI other than the document's own `$id` (one resolved \
     against, or naming, a nested `$id`) is not followed";
const ANCHOR: &str =
    "a `$ref` to an anchor (`$anchor`, or draft-07's `\"$id\": \"#name\"`) is not searched";
const SIBLINGS: &str = "draft-07's `$ref` overrides its siblings; the validator applies them \
     beside it, as 2019-09 and later do";

const EXCLUDED: &[Exclusion] = &[
    one(
        "draft2020-12",
        "not",
        "collect annotations inside a 'not', even if collection is disabled",
        "unevaluated property",
        UNEVALUATED,
    ),
    one(
        "draft2020-12",
        "ref",
        "remote ref, containing refs itself",
        "remote ref invalid",
        REMOTE,
    ),
    one(
        "draft2020-12",
        "ref",
        "Recursive references between schemas",
        "invalid tree",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "ref",
        "ref creates new scope when adjacent to keywords",
        "referenced subschema doesn't see annotations from properties",
        UNEVALUATED,
    ),
    one(
        "draft2020-12",
        "ref",
        "refs with relative uris and defs",
        "invalid on outer field",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "ref",
        "relative refs with absolute uris and defs",
        "invalid on outer field",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "ref",
        "$id must be resolved against nearest parent, not just immediate parent",
        "non-number is invalid",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "ref",
        "order of evaluation: $id and $ref",
        "data is invalid against first definition",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "ref",
        "order of evaluation: $id and $anchor and $ref",
        "data is invalid against first definition",
        ANCHOR,
    ),
    one(
        "draft2020-12",
        "ref",
        "URN base URI with URN and anchor ref",
        "a non-string is invalid",
        ANCHOR,
    ),
    one(
        "draft2020-12",
        "ref",
        "URN ref with nested pointer ref",
        "a non-string is invalid",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "ref",
        "ref to if",
        "a non-integer is invalid due to the $ref",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "ref",
        "ref to then",
        "a non-integer is invalid due to the $ref",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "ref",
        "ref to else",
        "a non-integer is invalid due to the $ref",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "ref",
        "ref with absolute-path-reference",
        "an integer is invalid",
        RELATIVE,
    ),
    one(
        "draft7",
        "ref",
        "ref overrides any sibling keywords",
        "ref valid, maxItems ignored",
        SIBLINGS,
    ),
    one(
        "draft7",
        "ref",
        "$ref prevents a sibling $id from changing the base uri",
        "$ref resolves to /definitions/base_foo, data does not validate",
        RELATIVE,
    ),
    one(
        "draft7",
        "ref",
        "remote ref, containing refs itself",
        "remote ref invalid",
        REMOTE,
    ),
    one(
        "draft7",
        "ref",
        "Recursive references between schemas",
        "invalid tree",
        RELATIVE,
    ),
    one(
        "draft7",
        "ref",
        "Location-independent identifier",
        "mismatch",
        ANCHOR,
    ),
    one(
        "draft7",
        "ref",
        "Reference an anchor with a non-relative URI",
        "mismatch",
        ANCHOR,
    ),
    one(
        "draft7",
        "ref",
        "Location-independent identifier with base URI change in subschema",
        "mismatch",
        ANCHOR,
    ),
    one(
        "draft7",
        "ref",
        "refs with relative uris and defs",
        "invalid on outer field",
        RELATIVE,
    ),
    one(
        "draft7",
        "ref",
        "relative refs with absolute uris and defs",
        "invalid on outer field",
        RELATIVE,
    ),
    one(
        "draft7",
        "ref",
        "$id must be resolved against nearest parent, not just immediate parent",
        "non-number is invalid",
        RELATIVE,
    ),
    one(
        "draft7",
        "ref",
        "URN base URI with URN and anchor ref",
        "a non-string is invalid",
        ANCHOR,
    ),
    one(
        "draft7",
        "ref",
        "ref to if",
        "a non-integer is invalid due to the $ref",
        RELATIVE,
    ),
    one(
        "draft7",
        "ref",
        "ref to then",
        "a non-integer is invalid due to the $ref",
        RELATIVE,
    ),
    one(
        "draft7",
        "ref",
        "ref to else",
        "a non-integer is invalid due to the $ref",
        RELATIVE,
    ),
    one(
        "draft7",
        "ref",
        "ref with absolute-path-reference",
        "an integer is invalid",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "optional/id",
        "$id inside an enum is not a real identifier",
        "no match on enum or $ref to $id",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "optional/unknownKeyword",
        "$id inside an unknown keyword is not a real identifier",
        "type matches non-schema in first anyOf",
        RELATIVE,
    ),
    one(
        "draft2020-12",
        "optional/unknownKeyword",
        "$id inside an unknown keyword is not a real identifier",
        "type matches non-schema in third anyOf",
        RELATIVE,
    ),
    one(
        "draft7",
        "optional/id",
        "id inside an enum is not a real identifier",
        "no match on enum or $ref to id",
        RELATIVE,
    ),
    one(
        "draft7",
        "optional/unknownKeyword",
        "$id inside an unknown keyword is not a real identifier",
        "type matches non-schema in first anyOf",
        RELATIVE,
    ),
    one(
        "draft7",
        "optional/unknownKeyword",
        "$id inside an unknown keyword is not a real identifier",
        "type matches non-schema in third anyOf",
        RELATIVE,
    ),
];

#[derive(Default)]
struct Tally {
    run: usize,
    passed: usize,
    excluded: BTreeMap<&'static str, usize>,
}

#[test]
fn json_schema_test_suite() {
    let mut mismatches = Vec::new();
    let mut used = vec![false; EXCLUDED.len()];
    let mut tallies = Vec::new();
    for (draft, files) in [("draft2020-12", DRAFT2020_12), ("draft7", DRAFT7)] {
        let mut tally = Tally::default();
        for file in files {
            let raw = read_shared(&format!("json-schema-test-suite/{draft}/{file}.json"));
            let groups: Vec<Value> = serde_json::from_slice(&raw).unwrap();
            for group in &groups {
                let group_name = group["description"].as_str().unwrap();
                let schema = &group["schema"];
                let compiled = InputSchema::compile(schema);
                for case in group["tests"].as_array().unwrap() {
                    let case_name = case["description"].as_str().unwrap();
                    let expected = case["valid"].as_bool().unwrap();
                    let exclusion = EXCLUDED.iter().position(|e| {
                        e.draft == draft
                            && e.file == *file
                            && e.group == group_name
                            && e.test == case_name
                    });
                    // Every schema of the suite is valid: one refused is a mismatch for each of
                    // its cases, the invalid ones too.
                    let verdict = match &compiled {
                        Ok(compiled) => compiled.validate(&case["data"]).map_err(|v| {
                            v.iter()
                                .map(ToString::to_string)
                                .collect::<Vec<_>>()
                                .join("; ")
                        }),
                        Err(error) => Err(format!("schema not compiled: {error}")),
                    };
                    let agrees = compiled.is_ok() && verdict.is_ok() == expected;
                    if let Some(index) = exclusion {
                        used[index] = true;
                        *tally.excluded.entry(EXCLUDED[index].reason).or_default() += 1;
                        if agrees {
                            // Not a failure: the exclusion may be dropped.
                            eprintln!(
                                "excluded but agrees: {draft}/{file}.json: {group_name:?} / {case_name:?}"
                            );
                        }
                        continue;
                    }
                    tally.run += 1;
                    if agrees {
                        tally.passed += 1;
                    } else {
                        mismatches.push(format!(
                            "{draft}/{file}.json: {group_name:?} / {case_name:?}: expected {}, \
                             got {verdict:?}\n    schema: {schema}\n    data: {}",
                            if expected { "valid" } else { "invalid" },
                            case["data"],
                        ));
                    }
                }
            }
        }
        tallies.push((draft, tally));
    }
    for (draft, tally) in &tallies {
        eprintln!(
            "{draft}: {} cases run, {} passed, {} excluded",
            tally.run,
            tally.passed,
            tally.excluded.values().sum::<usize>()
        );
        for (reason, count) in &tally.excluded {
            eprintln!("    {count} excluded: {reason}");
        }
    }
    let stale: Vec<String> = EXCLUDED
        .iter()
        .zip(&used)
        .filter(|(_, used)| !**used)
        .map(|(e, _)| format!("{}/{}: {:?} / {:?}", e.draft, e.file, e.group, e.test))
        .collect();
    assert!(stale.is_empty(), "exclusions naming no case: {stale:#?}");
    for mismatch in &mismatches {
        eprintln!("MISMATCH {mismatch}");
    }
    assert!(
        mismatches.is_empty(),
        "{} cases disagree with the JSON-Schema-Test-Suite (printed above)",
        mismatches.len()
    );
}
