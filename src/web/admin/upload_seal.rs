//! The seal of a previewed CSV upload (namespace and queue mappings): "apply" sends the previewed file back with
//! the digest of what the preview decided, both under an HMAC keyed by a secret the session keeps server-side, so
//! the import runs only on the file previewed, in this session, for this page; and where a parser's problem sits.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use tower_sessions::Session;

use crate::web::layout::PageError;

/// What the apply form carries: the file, what the preview decided, and the MAC over both.
pub struct Carried {
    pub file: String,
    pub plan: String,
    pub sig: String,
}

/// One page's seal: its own session secret and MAC domain, so one page's preview never applies on another.
pub struct UploadSeal {
    /// The session secret's name.
    pub secret: &'static str,
    /// Bytes the MAC starts with (ends with a NUL).
    pub domain: &'static [u8],
}

impl UploadSeal {
    /// The session's key of this page's previews.
    pub async fn key(&self, session: &Session) -> Result<String, PageError> {
        crate::auth::session::secret(session, self.secret).await.map_err(|e| PageError::Internal(e.to_string()))
    }

    /// The MAC of `file` and `plan` under `key` (hex); empty if the key cannot key a MAC.
    pub fn sign(&self, key: &str, file: &[u8], plan: &str) -> String {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key.as_bytes()) else { return String::new() };
        mac.update(self.domain);
        mac.update(&Sha256::digest(file));
        mac.update(plan.as_bytes());
        crate::digest::hex(&mac.finalize().into_bytes())
    }

    /// Whether `sig` is this page's MAC of `file` and `plan` under `key` (compared in constant time).
    pub fn signed_by(&self, key: &str, file: &[u8], plan: &str, sig: &str) -> bool {
        use subtle::ConstantTimeEq;
        let expected = self.sign(key, file, plan);
        !expected.is_empty() && bool::from(expected.as_bytes().ct_eq(sig.as_bytes()))
    }
}

/// The line and field of a problem as the parsers name it (`row 3: team`, `row 3`); `None` for the file's.
pub fn row_of(at: &str) -> Option<(usize, String)> {
    let rest = at.strip_prefix("row ")?;
    let (line, field) = rest.split_once(": ").unwrap_or((rest, ""));
    Some((line.parse().ok()?, field.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: UploadSeal = UploadSeal { secret: "a", domain: b"cardhour a preview\0" };
    const B: UploadSeal = UploadSeal { secret: "b", domain: b"cardhour b preview\0" };

    #[test]
    fn only_the_previewed_file_and_plan_of_this_page_pass() {
        let sig = A.sign("key", b"namespace,team\n", "plan-1");
        assert_eq!(sig.len(), 64);
        assert!(A.signed_by("key", b"namespace,team\n", "plan-1", &sig));
        assert!(!A.signed_by("key", b"namespace,team2\n", "plan-1", &sig), "another file");
        assert!(!A.signed_by("key", b"namespace,team\n", "plan-2", &sig), "another plan");
        assert!(!A.signed_by("other-session", b"namespace,team\n", "plan-1", &sig), "another session");
        assert!(!A.signed_by("key", b"namespace,team\n", "plan-1", ""), "no signature");
        assert!(!B.signed_by("key", b"namespace,team\n", "plan-1", &sig), "another page's preview");
    }

    #[test]
    fn a_problem_is_placed_at_its_row() {
        assert_eq!(row_of("row 3: valid_from"), Some((3, "valid_from".to_string())));
        assert_eq!(row_of("row 12"), Some((12, String::new())));
        assert_eq!(row_of("body"), None);
        assert_eq!(row_of("row x: team"), None);
    }
}
