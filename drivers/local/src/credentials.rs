//! S3 key pairs, drawn from a cryptographically secure generator (the
//! thread-local ChaCha generator seeded from the operating system).

use rand::Rng;

/// Characters of access key IDs (as AWS: uppercase letters and digits).
const KEY_ID_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
/// Characters of secret keys.
const SECRET_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Prefix of every access key ID this driver issues.
pub const KEY_ID_PREFIX: &str = "LCL";

fn draw(alphabet: &[u8], n: usize) -> String {
    let mut rng = rand::rng();
    (0..n)
        .map(|_| alphabet[rng.random_range(0..alphabet.len())] as char)
        .collect()
}

/// A new access key ID: 20 characters, `LCL` and 17 random ones (85 bits).
pub fn new_access_key_id() -> String {
    format!("{KEY_ID_PREFIX}{}", draw(KEY_ID_ALPHABET, 17))
}

/// A new secret access key: 40 random characters (240 bits).
pub fn new_secret_access_key() -> String {
    draw(SECRET_ALPHABET, 40)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_the_aws_shape_and_differ() {
        let a = new_access_key_id();
        assert_eq!(a.len(), 20);
        assert!(a.starts_with(KEY_ID_PREFIX));
        assert!(a.bytes().all(|b| KEY_ID_ALPHABET.contains(&b)));
        let s = new_secret_access_key();
        assert_eq!(s.len(), 40);
        assert_ne!(new_access_key_id(), a);
        assert_ne!(new_secret_access_key(), s);
    }
}
