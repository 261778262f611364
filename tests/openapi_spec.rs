//! The committed OpenAPI document must be the one the code serves; regenerate with
//! `cargo run -- openapi > openapi/openapi.json`.

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
    let spec: serde_json::Value = serde_json::from_str(&generated).unwrap();
    // every operation documents its security and its error body
    for (path, item) in spec["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            assert!(op["security"].is_array(), "{method} {path} has no security requirement");
            assert!(op["responses"].as_object().unwrap().len() >= 2, "{method} {path} documents no error");
        }
    }
}
