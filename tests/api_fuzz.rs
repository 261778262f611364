//! schemathesis (pinned in scripts/contract-requirements.txt) with every check against a test server over a real
//! database with a month of data: every operation of the committed document, a fixed seed, 50 examples each.
//! `schemathesis.toml` states what JSON Schema cannot (cross-field rules), each with its reason.
//! `SCHEMATHESIS_SEEDS=1,2,3` runs several seeds one after the other (default: seed 1).
//!
//! A step of `scripts/test.sh` after the other tests (it takes half a minute or more):
//! `cargo test --test suite api_fuzz:: -- --ignored --nocapture`.

use crate::common;

use common::api::{TestApi, seed};
use common::contract;
use sqlx::PgPool;

#[sqlx::test]
#[ignore = "a step of its own in scripts/test.sh (schemathesis, ~40 s)"]
async fn schemathesis_finds_nothing(pool: PgPool) {
    let api = TestApi::start(pool).await;
    seed(&api).await;
    let seeds = std::env::var("SCHEMATHESIS_SEEDS").unwrap_or_else(|_| "1".into());
    for seed in seeds.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        run_seed(&api, seed).await;
    }
}

async fn run_seed(api: &TestApi, seed: &str) {
    let (base, token, seed) = (api.base.clone(), api.admin.clone(), seed.to_string());
    let started = std::time::Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        let doc = contract::committed_document();
        let auth = format!("Authorization: Bearer {token}");
        contract::tool(
            "st",
            &[
                "--config-file",
                "schemathesis.toml",
                "--no-color",
                "run",
                doc.to_str().unwrap(),
                "--url",
                &base,
                "--header",
                &auth,
                "--checks",
                "all",
                "--seed",
                &seed,
                "--max-examples",
                "50",
            ],
            &[],
        )
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    println!("schemathesis took {:.1} s", started.elapsed().as_secs_f64());
    assert!(out.status.success(), "schemathesis found failures (above)");
    // every operation of the document was tested
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(contract::committed_document()).unwrap()).unwrap();
    let operations: usize = doc["paths"].as_object().unwrap().values().map(|i| i.as_object().unwrap().len()).sum();
    assert!(stdout.contains(&format!("{operations} selected")), "not every one of {operations} operations ran");
}
