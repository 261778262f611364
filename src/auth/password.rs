//! Password hashes: argon2id with the crate's default parameters (OWASP's minimum: 19 MiB, 2 passes), stored as
//! PHC strings, so the parameters travel with each hash and can be raised later without a migration.

use argon2::Argon2;
use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};

/// Shortest password accepted (NIST SP 800-63B's minimum for a chosen password).
pub const MIN_LEN: usize = 8;
/// Longest password accepted: hashing is costly, a megabyte of "password" is a denial of service.
pub const MAX_LEN: usize = 256;

/// The PHC string of `password` under a fresh random salt.
pub fn hash(password: &str) -> String {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        // only an output or parameter error of the defaults, which cannot happen for these inputs
        .expect("argon2 with default parameters hashes any password")
        .to_string()
}

/// Whether `password` is the one `phc` was made from. A malformed stored hash matches nothing.
pub fn verify(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

/// Spends the time of one [`verify`] without a stored hash, so a login for an unknown name takes as long as a
/// wrong password for a known one (the answer does not tell which part was wrong; neither may its timing).
pub fn verify_nothing(password: &str) {
    static DUMMY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| hash("not a password of anyone"));
    let _ = verify(password, &DUMMY);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_verify_and_are_salted() {
        let a = hash("correct horse");
        let b = hash("correct horse");
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        assert_ne!(a, b, "a fresh salt per hash");
        assert!(verify("correct horse", &a) && verify("correct horse", &b));
        assert!(!verify("correct horsE", &a));
        assert!(!verify("correct horse", "not a hash"));
        assert!(!verify("", &a));
    }
}
