//! How a source is told who asks: a bearer token or basic auth (each given inline or as a file read at every
//! request, since Kubernetes rotates what it mounts), a client certificate with its key and a private CA (mTLS),
//! and headers of one's own (the `X-Scope-OrgID` of a Mimir or Cortex tenant). A secret is never printed: the
//! `Debug` of everything here redacts it, and [`SourceAuth::describe`] names only what is used.

use std::fmt;
use std::path::{Path, PathBuf};

use reqwest::header::{HeaderName, HeaderValue};

/// A credential: used, compared, never printed.
#[derive(Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A secret given on the command line or in the environment: not empty.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.trim().is_empty() { Err("must not be empty".into()) } else { Ok(Self(s.to_string())) }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// A credential given inline or as a file; a file is read at every request, so a rotated token or password is
/// used as soon as it is written (as Prometheus does with its `*_file` settings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credential {
    Inline(Secret),
    File(PathBuf),
}

impl Credential {
    /// The credential now: a file's contents without surrounding white space.
    pub async fn read(&self) -> Result<Secret, String> {
        match self {
            Self::Inline(s) => Ok(s.clone()),
            Self::File(path) => {
                let text = tokio::fs::read_to_string(path).await.map_err(|e| read_error(path, &e))?;
                nonempty(path, &text)
            }
        }
    }

    /// A file that can be read now (checked when the configuration is read, so a wrong path fails at start).
    pub fn check(&self) -> Result<(), String> {
        match self {
            Self::Inline(_) => Ok(()),
            Self::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| read_error(path, &e))?;
                nonempty(path, &text).map(drop)
            }
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::Inline(_) => "inline".into(),
            Self::File(path) => format!("file {}", path.display()),
        }
    }
}

fn read_error(path: &Path, e: &std::io::Error) -> String {
    format!("cannot read {}: {e}", path.display())
}

fn nonempty(path: &Path, text: &str) -> Result<Secret, String> {
    let text = text.trim();
    if text.is_empty() { Err(format!("{} is empty", path.display())) } else { Ok(Secret(text.to_string())) }
}

/// What the `Authorization` header carries: one of the two, as it is one header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authorization {
    Bearer(Credential),
    Basic { username: String, password: Credential },
}

/// Client TLS: the CA that signed the server's certificate (instead of the system's roots), and a client
/// certificate with its key for servers that require one. PEM files, read when the client is built.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTls {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

impl ClientTls {
    pub fn is_empty(&self) -> bool {
        self.ca_file.is_none() && self.cert_file.is_none() && self.key_file.is_none()
    }

    /// A certificate comes with its key, and the files can be read.
    pub fn check(&self) -> Result<(), String> {
        match (&self.cert_file, &self.key_file) {
            (Some(_), None) => return Err("a client certificate needs its key file".into()),
            (None, Some(_)) => return Err("a client key needs its certificate file".into()),
            _ => {}
        }
        for path in [&self.ca_file, &self.cert_file, &self.key_file].into_iter().flatten() {
            std::fs::metadata(path).map_err(|e| read_error(path, &e))?;
        }
        Ok(())
    }

    /// `builder` trusting only the CA (if one is named) and presenting the client certificate (if one is).
    fn configure(&self, mut builder: reqwest::ClientBuilder) -> Result<reqwest::ClientBuilder, String> {
        let read = |path: &PathBuf| std::fs::read(path).map_err(|e| read_error(path, &e));
        if let Some(ca) = &self.ca_file {
            let certs = reqwest::Certificate::from_pem_bundle(&read(ca)?)
                .map_err(|e| format!("{}: not a PEM certificate: {e}", ca.display()))?;
            if certs.is_empty() {
                return Err(format!("{}: no PEM certificate in it", ca.display()));
            }
            builder = builder.tls_certs_only(certs);
        }
        if let (Some(cert), Some(key)) = (&self.cert_file, &self.key_file) {
            let mut pem = read(cert)?;
            pem.push(b'\n');
            pem.extend(read(key)?);
            let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
                format!("{} and {}: not a PEM certificate and private key: {e}", cert.display(), key.display())
            })?;
            builder = builder.identity(identity);
        }
        Ok(builder)
    }
}

/// A header sent with every request; its value is treated as a secret (an API key may travel so).
#[derive(Clone, PartialEq, Eq)]
pub struct Header {
    name: HeaderName,
    value: HeaderValue,
}

/// Headers cardhour sets itself, or that name the credentials of [`Authorization`].
const RESERVED_HEADERS: [&str; 6] =
    ["authorization", "host", "content-type", "content-encoding", "content-length", "x-prometheus-remote-read-version"];

impl Header {
    /// `name` and `value` as a header: a valid name other than those cardhour sets, a visible value.
    pub fn new(name: &str, value: &str) -> Result<Self, String> {
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| format!("`{}` is not a header name", name.escape_debug()))?;
        if RESERVED_HEADERS.contains(&name.as_str()) {
            return Err(format!(
                "header `{name}` is set by cardhour (use the bearer token or basic auth settings for Authorization)"
            ));
        }
        let mut value = HeaderValue::from_str(value.trim())
            .map_err(|_| format!("the value of header `{name}` has characters a header cannot carry"))?;
        value.set_sensitive(true);
        Ok(Self { name, value })
    }

    /// `Name: value`, as on the command line (`--prometheus-header 'X-Scope-OrgID: tenant-a'`).
    pub fn parse(line: &str) -> Result<Self, String> {
        let (name, value) =
            line.split_once(':').ok_or_else(|| format!("`{}`: expected `Name: value`", line.escape_debug()))?;
        Self::new(name, value)
    }

    pub fn name(&self) -> &HeaderName {
        &self.name
    }
}

impl fmt::Debug for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: <redacted>", self.name)
    }
}

/// Everything a source is told about who asks. The default tells nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceAuth {
    pub authorization: Option<Authorization>,
    pub tls: ClientTls,
    pub headers: Vec<Header>,
}

impl SourceAuth {
    pub fn is_empty(&self) -> bool {
        self.authorization.is_none() && self.tls.is_empty() && self.headers.is_empty()
    }

    /// What is used, without a secret: `bearer token (file /run/token); client certificate /c.pem; …`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match &self.authorization {
            Some(Authorization::Bearer(c)) => parts.push(format!("bearer token ({})", c.describe())),
            Some(Authorization::Basic { username, password }) => {
                parts.push(format!("basic auth as `{username}` (password {})", password.describe()))
            }
            None => {}
        }
        if let Some(ca) = &self.tls.ca_file {
            parts.push(format!("CA {}", ca.display()));
        }
        if let Some(cert) = &self.tls.cert_file {
            parts.push(format!("client certificate {}", cert.display()));
        }
        if !self.headers.is_empty() {
            let names: Vec<&str> = self.headers.iter().map(|h| h.name.as_str()).collect();
            parts.push(format!("headers {}", names.join(", ")));
        }
        if parts.is_empty() { "none".into() } else { parts.join("; ") }
    }

    /// The files named can be read and a certificate has its key; TLS settings need an https URL.
    pub fn check(&self, base_url: &str) -> Result<(), String> {
        self.tls.check()?;
        if !self.tls.is_empty() && !base_url.starts_with("https://") {
            return Err(format!("TLS settings (CA, client certificate) need an https:// URL, not {base_url}"));
        }
        match &self.authorization {
            Some(Authorization::Bearer(c)) => c.check(),
            Some(Authorization::Basic { username, password }) => {
                if username.is_empty() {
                    return Err("basic auth needs a username".into());
                }
                password.check()
            }
            None => Ok(()),
        }
    }

    /// The client builder with this TLS configuration.
    pub(super) fn configure(&self, builder: reqwest::ClientBuilder) -> Result<reqwest::ClientBuilder, String> {
        self.tls.configure(builder)
    }

    /// `request` with the credentials and headers (credential files read now).
    pub(super) async fn apply(&self, mut request: reqwest::RequestBuilder) -> Result<reqwest::RequestBuilder, String> {
        match &self.authorization {
            Some(Authorization::Bearer(c)) => request = request.bearer_auth(c.read().await?.expose()),
            Some(Authorization::Basic { username, password }) => {
                request = request.basic_auth(username, Some(password.read().await?.expose()))
            }
            None => {}
        }
        for h in &self.headers {
            request = request.header(h.name.clone(), h.value.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_secret_is_printed() {
        let auth = SourceAuth {
            authorization: Some(Authorization::Basic {
                username: "reader".into(),
                password: Credential::Inline(Secret::new("hunter2-password")),
            }),
            tls: ClientTls::default(),
            headers: vec![Header::new("X-Scope-OrgID", "tenant-secret-id").unwrap()],
        };
        let bearer = Authorization::Bearer(Credential::Inline(Secret::new("eyJhbGciOi-token")));
        for text in [format!("{auth:?}"), format!("{bearer:?}"), auth.describe()] {
            for secret in ["hunter2-password", "tenant-secret-id", "eyJhbGciOi-token"] {
                assert!(!text.contains(secret), "{text}");
            }
        }
        assert_eq!(auth.describe(), "basic auth as `reader` (password inline); headers x-scope-orgid");
        assert_eq!(SourceAuth::default().describe(), "none");
    }

    #[test]
    fn headers_are_parsed_and_reserved_ones_refused() {
        let h = Header::parse("X-Scope-OrgID: tenant-a|tenant-b").unwrap();
        assert_eq!(h.name().as_str(), "x-scope-orgid");
        assert_eq!(h.value, "tenant-a|tenant-b");
        assert!(h.value.is_sensitive());
        assert!(Header::parse("X-Scope-OrgID tenant").unwrap_err().contains("Name: value"));
        assert!(Header::parse("Authorization: Bearer x").unwrap_err().contains("bearer token or basic auth"));
        assert!(Header::parse("Content-Type: text/plain").unwrap_err().contains("set by cardhour"));
        assert!(Header::parse("Bad Name: x").unwrap_err().contains("not a header name"));
        assert!(Header::parse("X-A: a\u{7f}b").unwrap_err().contains("cannot carry"));
    }

    #[tokio::test]
    async fn a_credential_file_is_read_at_each_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "first\n").unwrap();
        let c = Credential::File(path.clone());
        assert_eq!(c.read().await.unwrap().expose(), "first");
        // Kubernetes swaps a rotated token in: the next request sends the new one
        std::fs::write(&path, "  second  \n").unwrap();
        assert_eq!(c.read().await.unwrap().expose(), "second");
        std::fs::write(&path, "\n").unwrap();
        assert!(c.read().await.unwrap_err().contains("is empty"));
        assert!(c.check().unwrap_err().contains("is empty"));
        let gone = Credential::File(dir.path().join("absent"));
        assert!(gone.check().unwrap_err().contains("cannot read"));
    }

    #[test]
    fn tls_settings_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("c.pem");
        std::fs::write(&cert, "x").unwrap();
        let only_cert = ClientTls { cert_file: Some(cert.clone()), ..ClientTls::default() };
        assert!(only_cert.check().unwrap_err().contains("needs its key file"));
        let absent = ClientTls { ca_file: Some(dir.path().join("ca.pem")), ..ClientTls::default() };
        assert!(absent.check().unwrap_err().contains("cannot read"));
        let auth = SourceAuth { tls: ClientTls { ca_file: Some(cert), ..ClientTls::default() }, ..Default::default() };
        assert!(auth.check("http://prom:9090").unwrap_err().contains("https://"));
        assert!(auth.check("https://prom:9090").is_ok());
        // a file that is not PEM is refused when the client is built
        let err = auth.configure(reqwest::Client::builder()).map(drop).unwrap_err();
        assert!(err.contains("PEM"), "{err}");
    }
}
