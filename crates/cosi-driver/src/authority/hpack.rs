//! HPACK (RFC 7541) for reading a client's header blocks and writing them
//! again: `loona-hpack`'s decoder, which keeps the dynamic table in step
//! with the client's encoder, within bounds of our own; and an encoder that
//! writes every field as a literal that is not indexed, so the server's
//! decoder never has a dynamic table to keep in step with anything.
//! (`loona-hpack`'s encoder indexes what it writes, so it is not used.)

use std::fmt;

use loona_hpack::decoder::DecoderError;
use loona_hpack::encoder::encode_integer_into;

/// Why a header block could not be decoded (RFC 7541 calls each a
/// decoding error, and HTTP/2 a connection error of type COMPRESSION_ERROR).
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[error(transparent)]
pub struct HpackError(Reason);

// `DecoderError` is a tree of field-less enums: equality is total.
impl Eq for HpackError {}

#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
enum Reason {
    /// Not valid HPACK: a truncated field, an index in neither table, bad
    /// Huffman code, a table size update past [`MAX_TABLE_SIZE`]...
    #[error(transparent)]
    Invalid(#[from] DecoderError),
    /// More than [`MAX_LIST_SIZE`] once decoded.
    #[error("header list larger than {MAX_LIST_SIZE} bytes")]
    ListTooLarge,
}

impl From<DecoderError> for HpackError {
    fn from(e: DecoderError) -> Self {
        Self(e.into())
    }
}

/// One header field of a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The name, lower-case (`:authority` for the pseudo-header).
    pub name: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
}

/// The largest dynamic table a client may ask for. The decoder starts at
/// 4096, SETTINGS_HEADER_TABLE_SIZE's default, which the SDK's server keeps
/// and so bounds what a client may ask for; this only bounds what a client that ignores the setting
/// makes the decoder hold.
const MAX_TABLE_SIZE: usize = 64 * 1024;

/// The largest decoded header list (names, values and 32 bytes a field, as
/// SETTINGS_MAX_HEADER_LIST_SIZE counts), h2's own upper bound: a small
/// block that names a large table entry many times decodes to far more
/// than it is.
const MAX_LIST_SIZE: usize = 16 << 20;

/// Decodes the header blocks of one connection, in order.
pub struct Decoder(loona_hpack::Decoder<'static>);

impl Default for Decoder {
    fn default() -> Self {
        let mut decoder = loona_hpack::Decoder::new();
        decoder.set_max_allowed_table_size(MAX_TABLE_SIZE);
        Self(decoder)
    }
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder").finish_non_exhaustive()
    }
}

impl Decoder {
    /// The fields of one whole header block (HEADERS and its CONTINUATIONs
    /// joined), updating the dynamic table as the client's encoder did.
    pub fn decode(&mut self, block: &[u8]) -> Result<Vec<Field>, HpackError> {
        let mut fields = Vec::new();
        let mut size = 0usize;
        self.0.decode_with_cb(block, |name, value| {
            size = size.saturating_add(name.len() + value.len() + 32);
            // Past the bound, only count: the block is refused below.
            if size <= MAX_LIST_SIZE {
                fields.push(Field {
                    name: name.into_owned(),
                    value: value.into_owned(),
                });
            }
        })?;
        if size > MAX_LIST_SIZE {
            return Err(HpackError(Reason::ListTooLarge));
        }
        Ok(fields)
    }
}

/// Appends `fields` as literals with new names, not indexed, without
/// Huffman coding.
pub fn encode(fields: &[Field], out: &mut Vec<u8>) {
    for field in fields {
        out.push(0x00);
        for s in [&field.name, &field.value] {
            encode_integer_into(s.len(), 7, 0x00, out).expect("a Vec takes every write");
            out.extend_from_slice(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(fields: &[Field]) -> Vec<(&str, &str)> {
        fields
            .iter()
            .map(|f| {
                (
                    std::str::from_utf8(&f.name).unwrap(),
                    std::str::from_utf8(&f.value).unwrap(),
                )
            })
            .collect()
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn decodes_the_rfc_huffman_requests_with_their_dynamic_table() {
        // RFC 7541, C.4: three requests on one connection.
        let mut d = Decoder::default();
        let first = d
            .decode(&hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"))
            .unwrap();
        assert_eq!(
            pairs(&first),
            [
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com")
            ]
        );
        let second = d.decode(&hex("8286 84be 5886 a8eb 1064 9cbf")).unwrap();
        assert_eq!(pairs(&second)[3], (":authority", "www.example.com"));
        assert_eq!(pairs(&second)[4], ("cache-control", "no-cache"));
        let third = d
            .decode(&hex(
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ))
            .unwrap();
        assert_eq!(
            pairs(&third),
            [
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value")
            ]
        );
        // Three entries (164 bytes): the oldest is index 64.
        let oldest = d.decode(&[0xc0]).unwrap();
        assert_eq!(pairs(&oldest), [(":authority", "www.example.com")]);
        assert!(d.decode(&[0xc1]).is_err());
    }

    #[test]
    fn evicts_the_oldest_entries_and_obeys_size_updates() {
        let mut d = Decoder::default();
        let mut block = vec![0x3f, 0x41]; // size update to 31 + 65 = 96
        for value in ["aaaaaaaaaa", "bbbbbbbbbb", "cccccccccc"] {
            block.extend([0x40, 0x01, b'x', 0x0a]); // new name "x", indexed
            block.extend(value.as_bytes());
        }
        block.push(0xbe); // index 62: the newest
        block.push(0xbf); // index 63: the one before
        let fields = d.decode(&block).unwrap();
        // Each entry is 1 + 10 + 32 = 43 bytes: two fit in 96.
        assert_eq!(pairs(&fields)[3], ("x", "cccccccccc"));
        assert_eq!(pairs(&fields)[4], ("x", "bbbbbbbbbb"));
        assert!(d.decode(&[0xc0]).is_err(), "index 64 was evicted");
        // An entry larger than the table empties it.
        let mut big = vec![0x40, 0x01, b'y', 0x7f, 0x01];
        big.extend([b'z'; 128]);
        d.decode(&big).unwrap();
        assert!(d.decode(&[0xbe]).is_err(), "index 62 is gone too");
    }

    #[test]
    fn refuses_malformed_blocks() {
        let mut d = Decoder::default();
        for block in [
            &[0x80][..],                                 // index 0
            &[0x00, 0x05, b'a'],                         // truncated string
            &[0xff, 0xff],                               // truncated integer
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],       // integer overflow
            &[0x82, 0x20],                               // size update last
            &[0x3f, 0xe1, 0xff, 0x04],                   // table past 64 KiB
            &[0x00, 0x81, 0xff, 0x00],                   // Huffman: bad padding
            &[0x00, 0x84, 0xff, 0xff, 0xff, 0xff, 0x00], // Huffman: EOS
        ] {
            assert!(d.decode(block).is_err(), "{block:x?}");
        }
    }

    #[test]
    fn refuses_a_block_that_decodes_past_the_list_limit() {
        let mut d = Decoder::default();
        // A 4000-byte entry, then 5000 one-byte references to it: 20 MB
        // from 9 kB.
        let mut block = vec![0x40, 0x01, b'x'];
        encode_integer_into(4000, 7, 0x00, &mut block).unwrap();
        block.extend([b'v'; 4000]);
        block.extend([0xbe; 5000]);
        let decoded = d.decode(&block);
        assert!(decoded == Err(HpackError(Reason::ListTooLarge)));
        // 300 references (1.2 MB) are within it.
        block.truncate(block.len() - 4700);
        assert_eq!(d.decode(&block).unwrap().len(), 301);
    }

    #[test]
    fn encodes_literals_that_decode_to_the_same_fields_and_index_nothing() {
        let fields = vec![
            Field {
                name: b":authority".to_vec(),
                value: b"localhost".to_vec(),
            },
            Field {
                name: b"authorization".to_vec(),
                value: vec![b'k'; 300],
            },
        ];
        let mut block = Vec::new();
        encode(&fields, &mut block);
        let mut d = Decoder::default();
        assert_eq!(d.decode(&block).unwrap(), fields);
        // Nothing was added to the table: index 62 names nothing.
        assert!(d.decode(&[0xbe]).is_err());
    }
}
