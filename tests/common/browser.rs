//! A headless Chromium over WebDriver for the portal's browser tests: `chromedriver` on a free loopback port
//! (Debian's chromium-driver, as `scripts/test.sh` installs it), a fantoccini client with a fresh profile, and
//! screenshots as PNG files under `target/screenshots/`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder};

/// `$CHROMEDRIVER` / `$CHROMIUM` override Debian's paths.
fn path(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session.
    pub async fn start() -> Browser {
        let port = super::free_port().unwrap();
        let driver = Command::new(path("CHROMEDRIVER", "/usr/bin/chromedriver"))
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (scripts/test.sh installs chromium-driver)");
        let profile = tempfile::Builder::new().prefix("cardhour-chromium-").tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": path("CHROMIUM", "/usr/bin/chromium"),
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--disable-background-networking", "--disable-component-update", "--disable-sync",
                         "--no-first-run", "--window-size=1280,900",
                         format!("--user-data-dir={}", profile.path().display())],
            }),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        let client = loop {
            let attempt = ClientBuilder::rustls()
                .unwrap()
                .capabilities(caps.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await;
            match attempt {
                Ok(c) => break c,
                // chromedriver is not listening yet
                Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(200)).await,
                Err(e) => panic!("chromedriver on port {port}: {e}"),
            }
        };
        Browser { client, driver, _profile: profile }
    }

    /// Saves a screenshot of the page as `target/screenshots/<name>.png`; returns the path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join(format!("{name}.png"));
        std::fs::write(&file, self.client.screenshot().await.unwrap()).unwrap();
        file
    }

    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}
