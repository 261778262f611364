//! API tokens: 32 random bytes shown once, stored as their SHA-256 (tokens are not passwords: with 256 bits of
//! entropy a fast digest is the right tool, and it makes lookup by hash possible).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;

const PREFIX: &str = "chr_";

/// A freshly issued token: the secret to hand out, and what to store.
pub struct NewToken {
    pub secret: String,
    pub hash: String,
}

pub fn new_token() -> NewToken {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    let secret = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
    let hash = hash_token(&secret);
    NewToken { secret, hash }
}

pub fn hash_token(secret: &str) -> String {
    crate::digest::sha256_hex(secret.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashed() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a.secret, b.secret);
        assert!(a.secret.starts_with("chr_") && a.secret.len() == 4 + 43);
        assert_eq!(a.hash, hash_token(&a.secret));
        assert_eq!(hash_token("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
