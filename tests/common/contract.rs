//! The contract tools of `scripts/contract-venv.sh` (openapi-spec-validator, openapi-python-client,
//! schemathesis) for the tests that hold the committed OpenAPI document against tools no one here wrote.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The committed document.
pub fn committed_document() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json")
}

/// The venv's `bin/`, made (once per clone, then reused) by `scripts/contract-venv.sh`.
pub fn venv_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/contract-venv.sh");
        let out = Command::new("bash").arg(&script).stdin(Stdio::null()).output().expect("running contract-venv.sh");
        assert!(out.status.success(), "contract-venv.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join("bin")
    })
    .clone()
}

/// Runs a tool of the venv; returns its output (whatever its exit status).
pub fn tool(name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let bin = venv_bin();
    let mut cmd = Command::new(bin.join(name));
    cmd.args(args).stdin(Stdio::null()).current_dir(env!("CARGO_MANIFEST_DIR"));
    // the venv first on PATH: its tools call each other (the client generator runs ruff)
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("{}:{path}", bin.display()));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap_or_else(|e| panic!("running {name}: {e}"))
}

/// The Python client `openapi-python-client` generates from the committed document, as a package `cardhour_client`
/// under the returned directory (put it on `PYTHONPATH`).
pub fn generate_client(dir: &Path) -> PathBuf {
    // `--meta none`: the output path is the package itself
    let out_dir = dir.join("cardhour_client");
    let doc = committed_document();
    let out = tool(
        "openapi-python-client",
        &[
            "generate",
            "--path",
            doc.to_str().unwrap(),
            "--output-path",
            out_dir.to_str().unwrap(),
            "--meta",
            "none",
            "--overwrite",
        ],
        &[],
    );
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "openapi-python-client refused the document:\n{text}");
    // a generator that skipped an operation or a schema says so with a warning: the only ones allowed are the CSV
    // imports (namespace and queue mappings), whose `text/csv` body this generator does not support
    let skipped = text.matches("Endpoint will not be generated").count();
    let csv = ["POST /api/v1/mappings/import", "POST /api/v1/queue-mappings/import"]
        .iter()
        .map(|op| text.matches(&format!("WARNING parsing {op}")).count())
        .sum::<usize>();
    assert!(skipped == csv && csv <= 2, "openapi-python-client skipped operations:\n{text}");
    dir.to_path_buf()
}
