//! Issue 33, item 1: a server started before the CJK font was installed makes PDFs once it is — no restart — and
//! until then its health answer says that PDFs cannot be made and why. The font is "installed" by copying Noto Sans
//! CJK to the path `CARDHOUR_PDF_FONT` names (set before anything loads a font: this file's only test). The quick
//! start installs what the PDF needs, as `scripts/test.sh` does.

use crate::common;

use common::api::TestApi;
use reqwest::Method;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_font_installed_after_start_makes_pdfs_and_health_said_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let font = dir.path().join("NotoSansCJK-Regular.ttc");
    // SAFETY: nextest runs every test in its own process (scripts/test.sh's `cargo test` fallback runs this one
    // alone), and this is before any thread of it reads the environment
    unsafe { std::env::set_var(cardhour::export::FONT_ENV, &font) };
    let db = common::TestDb::migrated().unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    common::api::seed(&api).await;
    let pdf = format!("/api/v1/exports/{}/statements.pdf", common::api::SEED_MONTH);

    let (status, health) = api.call(Method::GET, "/api/v1/ingest/health", Some(&api.finance), None).await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["pdf"]["available"], false, "{health}");
    let problem = health["pdf"]["problem"].as_str().unwrap();
    assert!(problem.contains("fonts-noto-cjk") && problem.contains(font.to_str().unwrap()), "{problem}");
    let (status, _) = api.call(Method::GET, &pdf, Some(&api.finance), None).await;
    assert_eq!(status, 500, "no font yet");

    // installed while the server runs
    let installed = cardhour::export::CJK_FONT_PATHS
        .iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("Noto Sans CJK (scripts/test.sh installs fonts-noto-cjk)");
    std::fs::copy(installed, &font).unwrap();
    let (_, health) = api.call(Method::GET, "/api/v1/ingest/health", Some(&api.finance), None).await;
    assert_eq!(health["pdf"]["available"], true, "{health}");
    assert!(health["pdf"]["fonts"].as_str().unwrap().contains("Noto Sans CJK"), "{health}");
    let r = api.client.get(format!("{}{pdf}", api.base)).bearer_auth(&api.finance).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.bytes().await.unwrap().starts_with(b"%PDF-"));

    // the quick start installs the fonts a PDF needs, as the test script does
    let quickstart = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/quickstart.sh")).unwrap();
    let line =
        quickstart.lines().find(|l| l.trim_start().starts_with("ensure_apt_packages fonts")).expect("installs fonts");
    for pkg in ["fonts-noto-cjk", "fonts-dejavu-core", "fonts-symbola"] {
        assert!(line.contains(pkg), "{line}");
    }
}
