//! A PostgreSQL server of the test's own (initdb into a temporary directory, its own loopback port), for tests
//! that stop or restart the database: never the shared server on 5432 that other tests use.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// Debian's PostgreSQL 15 server binaries (`$PG_BIN` overrides).
fn pg_bin(tool: &str) -> PathBuf {
    let dir = std::env::var_os("PG_BIN").map_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"), PathBuf::from);
    dir.join(tool)
}

fn running_as_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Runs a server tool as the `postgres` user when the test runs as root (initdb refuses root).
fn as_server_user(tool: &str, args: &[&str]) -> Result<()> {
    let mut cmd = if running_as_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(pg_bin(tool));
        c
    } else {
        Command::new(pg_bin(tool))
    };
    let out = cmd.args(args).stdin(Stdio::null()).output().with_context(|| format!("running {tool}"))?;
    if !out.status.success() {
        bail!(
            "{tool} {args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// A server on `127.0.0.1:<port>` (trust auth, user `postgres`), stopped and removed on drop.
pub struct TestPostgres {
    pub port: u16,
    dir: tempfile::TempDir,
}

impl TestPostgres {
    /// initdb, then start; `cardhour` is created as an empty database.
    pub fn start() -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("cardhour-pg-").tempdir()?;
        if running_as_root() {
            let out = Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()).output()?;
            if !out.status.success() {
                bail!("chown postgres {}: {}", dir.path().display(), String::from_utf8_lossy(&out.stderr));
            }
        }
        let data = dir.path().join("data");
        let data_s = data.to_string_lossy().into_owned();
        as_server_user("initdb", &["-D", &data_s, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"])?;
        let mut pg = Self { port: 0, dir };
        for attempt in 1.. {
            pg.port = super::free_port()?;
            match pg.start_server() {
                Ok(()) => break,
                // a port picked free can be taken before the server binds it
                Err(_) if attempt < 4 && pg.log().contains("already in use") => continue,
                Err(e) => return Err(e),
            }
        }
        pg.psql("postgres", "CREATE DATABASE cardhour")?;
        Ok(pg)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").to_string_lossy().into_owned()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn start_server(&self) -> Result<()> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            self.port,
            self.dir.path().display()
        );
        let log = self.log_path().to_string_lossy().into_owned();
        as_server_user("pg_ctl", &["-D", &self.data(), "-o", &options, "-l", &log, "-w", "-t", "60", "start"])
    }

    /// `postgres://postgres@127.0.0.1:<port>/cardhour`
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/cardhour", self.port)
    }

    /// Stops the server (fast: open connections are cut, as a crash or an upgrade would).
    pub fn stop(&self) -> Result<()> {
        as_server_user("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"])
    }

    /// Starts the server again after [`Self::stop`], on the same port.
    pub fn restart(&self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self.start_server() {
                Ok(()) => return Ok(()),
                Err(_) if Instant::now() < deadline => sleep(Duration::from_millis(300)),
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs SQL with psql on `database`; returns the unaligned, tuples-only output.
    pub fn psql(&self, database: &str, sql: &str) -> Result<String> {
        let url = format!("postgres://postgres@127.0.0.1:{}/{database}", self.port);
        let out = Command::new("psql")
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", &url, "-c", sql])
            .stdin(Stdio::null())
            .output()
            .context("running psql")?;
        if !out.status.success() {
            bail!("psql {sql:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Serves TLS only (as a managed database does): installs `cert_pem`/`key_pem` as the server's certificate,
    /// refuses every unencrypted TCP connection in pg_hba.conf, and restarts the server.
    pub fn require_tls(&self, cert_pem: &str, key_pem: &str) -> Result<()> {
        let data = self.dir.path().join("data");
        fs::write(data.join("server.crt"), cert_pem)?;
        fs::write(data.join("server.key"), key_pem)?;
        fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
        )?;
        let mut conf = fs::read_to_string(data.join("postgresql.conf"))?;
        conf.push_str("\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
        fs::write(data.join("postgresql.conf"), conf)?;
        if running_as_root() {
            let out = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&data).output()?;
            if !out.status.success() {
                bail!("chown postgres {}: {}", data.display(), String::from_utf8_lossy(&out.stderr));
            }
        }
        // the server refuses a key others can read
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(data.join("server.key"), fs::Permissions::from_mode(0o600))?;
        self.stop()?;
        self.restart()
    }
}

impl Drop for TestPostgres {
    fn drop(&mut self) {
        let _ = as_server_user("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"]);
    }
}
