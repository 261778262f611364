//! The committed OpenAPI document must be the one the code serves (regenerate with
//! `cargo run -- openapi > openapi/openapi.json`), and valid: `openapi-spec-validator` (pinned in
//! scripts/contract-requirements.txt) accepts it, and — spelled out here so a failure says exactly what — no
//! `$ref` dangles, every response has a description, every path parameter is in its path.

use crate::common;

use common::contract;
use serde_json::{Value, json};

#[test]
fn committed_openapi_matches_the_code() {
    let generated = cardhour::api::openapi_json();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/openapi.json is out of date: run `cargo run -- openapi > openapi/openapi.json` and commit it"
    );
    let spec: Value = serde_json::from_str(&generated).unwrap();
    assert_eq!(spec["info"]["version"], env!("CARGO_PKG_VERSION"));
    // every operation documents its security and its error body
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            assert!(op["security"].is_array(), "{method} {path} has no security requirement");
            assert!(op["responses"].as_object().unwrap().len() >= 2, "{method} {path} documents no error");
        }
    }
}

/// Every defect of `doc` these checks know, one line each.
fn defects(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    refs(doc, doc, "", &mut out);
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            for (status, r) in op["responses"].as_object().into_iter().flatten() {
                if r.get("$ref").is_none() && r["description"].as_str().is_none_or(|d| d.trim().is_empty()) {
                    out.push(format!("{method} {path}: response {status} has no description"));
                }
            }
            for p in op["parameters"].as_array().into_iter().flatten() {
                let name = p["name"].as_str().unwrap_or_default();
                if p["in"] == "path" && !path.contains(&format!("{{{name}}}")) {
                    out.push(format!("{method} {path}: `{name}` is declared in: path but is not in the path"));
                }
            }
        }
    }
    out
}

/// Every `$ref` under `v` that names nothing in `doc`.
fn refs(doc: &Value, v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get("$ref") {
                let target = r.strip_prefix('#').and_then(|ptr| doc.pointer(ptr));
                if target.is_none() {
                    out.push(format!("{at}: dangling $ref {r}"));
                }
            }
            for (k, child) in map {
                refs(doc, child, &format!("{at}/{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                refs(doc, child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// openapi-spec-validator on a file: its verdict and what it said.
fn spec_validator(path: &std::path::Path) -> (bool, String) {
    let out = contract::tool("openapi-spec-validator", &[path.to_str().unwrap()], &[]);
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

#[test]
fn the_committed_document_is_valid() {
    let path = contract::committed_document();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let found = defects(&doc);
    assert!(found.is_empty(), "the committed document has defects:\n{}", found.join("\n"));
    let (ok, said) = spec_validator(&path);
    assert!(ok, "openapi-spec-validator refuses openapi/openapi.json:\n{said}");
}

#[test]
fn the_checks_catch_a_dangling_reference_and_a_missing_description() {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(contract::committed_document()).unwrap()).unwrap();
    let mut broken = doc.clone();
    let op = &mut broken["paths"]["/api/v1/teams"]["get"];
    op["responses"]["200"]["content"]["application/json"]["schema"] = json!({"$ref": "#/components/schemas/Nope"});
    op["responses"]["401"].as_object_mut().unwrap().remove("description");
    let found = defects(&broken);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("dangling $ref #/components/schemas/Nope"), "{found:?}");
    assert!(found[1].contains("get /api/v1/teams: response 401 has no description"), "{found:?}");
    // the validator says no to either defect alone
    let dir = tempfile::tempdir().unwrap();
    let mut dangling = doc.clone();
    dangling["paths"]["/api/v1/teams"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] =
        json!({"$ref": "#/components/schemas/Nope"});
    let mut undescribed = doc;
    undescribed["paths"]["/api/v1/teams"]["get"]["responses"]["401"].as_object_mut().unwrap().remove("description");
    for (name, d) in [("dangling", dangling), ("undescribed", undescribed)] {
        let file = dir.path().join(format!("{name}.json"));
        std::fs::write(&file, serde_json::to_vec(&d).unwrap()).unwrap();
        let (ok, said) = spec_validator(&file);
        assert!(!ok, "openapi-spec-validator accepted a {name} document: {said}");
    }
}
