//! What a reader gets out of a download or a page: a PDF's text (`pdftotext`), a CSV's rows, a page's visible text.

use std::collections::BTreeMap;
use std::process::Command;

/// The text of a PDF as `pdftotext -layout` reads it (poppler-utils, as `scripts/test.sh` installs it).
pub fn pdftotext(pdf: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = Command::new("pdftotext").arg("-layout").arg(&path).arg("-").output().expect("pdftotext (poppler-utils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The rows of a CSV export (UTF-8 with BOM, as every export is written) as header → cell.
pub fn csv_rows(bytes: &[u8]) -> Vec<BTreeMap<String, String>> {
    let body = bytes.strip_prefix("\u{feff}".as_bytes()).expect("UTF-8 with BOM");
    csv::Reader::from_reader(body).deserialize().map(Result::unwrap).collect()
}

/// The text a reader sees of a page's content (from its `<h1>`: the header's navigation, tags and attribute values
/// left out).
pub fn visible(page: &str) -> String {
    let main = page.split("<h1>").nth(1).unwrap_or(page);
    let mut out = String::new();
    let mut in_tag = false;
    for c in main.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}
