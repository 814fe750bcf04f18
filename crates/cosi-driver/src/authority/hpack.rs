//! Just enough HPACK (RFC 7541) to read a client's header blocks and write
//! them again: a decoder that keeps the dynamic table in step with the
//! client's encoder, and an encoder that writes every field as a literal
//! that is not indexed, so the server's decoder never has a dynamic table
//! to keep in step with anything.

use std::collections::VecDeque;

use super::huffman;

/// Why a header block could not be decoded (RFC 7541 calls each a
/// decoding error, and HTTP/2 a connection error of type COMPRESSION_ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    /// The block ends inside a field.
    #[error("header block truncated")]
    Truncated,
    /// An integer too large for any field or table.
    #[error("integer overflow in header block")]
    Overflow,
    /// An index of neither the static nor the dynamic table.
    #[error("header index {0} is in neither table")]
    BadIndex(usize),
    /// A Huffman-coded string with the end-of-string code or bad padding.
    #[error("invalid Huffman-coded string")]
    Huffman,
    /// A dynamic table size update past the limit, or after a field.
    #[error("invalid dynamic table size update")]
    SizeUpdate,
}

/// One header field of a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The name, lower-case (`:authority` for the pseudo-header).
    pub name: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Sent as "never indexed" (RFC 7541 §6.2.3): written again as such.
    pub sensitive: bool,
}

/// The static table (RFC 7541, Appendix A), from index 1.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The dynamic table size both ends start with (SETTINGS_HEADER_TABLE_SIZE's
/// default, which the SDK's server keeps).
pub const DEFAULT_TABLE_SIZE: usize = 4096;

/// The largest dynamic table a client may ask for. The server's setting
/// bounds it (4096); this only bounds what a client that ignores the setting
/// makes the decoder hold.
const MAX_TABLE_SIZE: usize = 64 * 1024;

/// What an entry costs in the table besides its bytes (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;

/// Decodes the header blocks of one connection, in order.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoder {
    /// Newest first: index 62 is the front.
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max_size: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Self {
            table: VecDeque::new(),
            size: 0,
            max_size: DEFAULT_TABLE_SIZE,
        }
    }
}

impl Decoder {
    /// The fields of one whole header block (HEADERS and its CONTINUATIONs
    /// joined), updating the dynamic table as the client's encoder did.
    pub fn decode(&mut self, mut block: &[u8]) -> Result<Vec<Field>, HpackError> {
        let mut fields = Vec::new();
        while let Some(&first) = block.first() {
            if first & 0x80 != 0 {
                let index = integer(&mut block, 7)?;
                let (name, value) = self.entry(index)?;
                fields.push(Field {
                    name,
                    value,
                    sensitive: false,
                });
            } else if first & 0x40 != 0 {
                let field = self.literal(&mut block, 6, false)?;
                self.insert(field.name.clone(), field.value.clone());
                fields.push(field);
            } else if first & 0x20 != 0 {
                // Only at the start of a block (RFC 7541 §4.2).
                if !fields.is_empty() {
                    return Err(HpackError::SizeUpdate);
                }
                let size = integer(&mut block, 5)?;
                if size > MAX_TABLE_SIZE {
                    return Err(HpackError::SizeUpdate);
                }
                self.max_size = size;
                self.evict(0);
            } else {
                let sensitive = first & 0x10 != 0;
                fields.push(self.literal(&mut block, 4, sensitive)?);
            }
        }
        Ok(fields)
    }

    fn entry(&self, index: usize) -> Result<(Vec<u8>, Vec<u8>), HpackError> {
        match index {
            1..=61 => {
                let (name, value) = STATIC[index - 1];
                Ok((name.into(), value.into()))
            }
            _ => index
                .checked_sub(62)
                .and_then(|i| self.table.get(i))
                .cloned()
                .ok_or(HpackError::BadIndex(index)),
        }
    }

    /// A literal field whose name index has `prefix` bits (0: a new name).
    fn literal(&self, block: &mut &[u8], prefix: u8, sensitive: bool) -> Result<Field, HpackError> {
        let name = match integer(block, prefix)? {
            0 => string(block)?,
            index => self.entry(index)?.0,
        };
        let value = string(block)?;
        Ok(Field {
            name,
            value,
            sensitive,
        })
    }

    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        // An entry larger than the table empties it and is not added.
        self.evict(size.min(self.max_size + 1));
        if size <= self.max_size {
            self.size += size;
            self.table.push_front((name, value));
        }
    }

    /// Drops the oldest entries until `room` more fits.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max_size {
            let Some((name, value)) = self.table.pop_back() else {
                self.size = 0;
                return;
            };
            self.size -= name.len() + value.len() + ENTRY_OVERHEAD;
        }
    }
}

/// An integer with a `prefix`-bit prefix (RFC 7541 §5.1).
fn integer(block: &mut &[u8], prefix: u8) -> Result<usize, HpackError> {
    let (&first, rest) = block.split_first().ok_or(HpackError::Truncated)?;
    *block = rest;
    let mask = (1usize << prefix) - 1;
    let mut value = usize::from(first) & mask;
    if value < mask {
        return Ok(value);
    }
    for shift in (0..).step_by(7) {
        let (&byte, rest) = block.split_first().ok_or(HpackError::Truncated)?;
        *block = rest;
        // Past 28 bits no size in a block is meaningful.
        if shift > 21 {
            return Err(HpackError::Overflow);
        }
        value += usize::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    Ok(value)
}

/// A string literal, Huffman-coded or not (RFC 7541 §5.2).
fn string(block: &mut &[u8]) -> Result<Vec<u8>, HpackError> {
    let huffman = block.first().is_some_and(|b| b & 0x80 != 0);
    let length = integer(block, 7)?;
    if length > block.len() {
        return Err(HpackError::Truncated);
    }
    let (bytes, rest) = block.split_at(length);
    *block = rest;
    if huffman {
        huffman::decode(bytes)
    } else {
        Ok(bytes.to_vec())
    }
}

/// Appends `fields` as literals with new names, never indexed when they came
/// so and not indexed otherwise, without Huffman coding.
pub fn encode(fields: &[Field], out: &mut Vec<u8>) {
    for field in fields {
        out.push(if field.sensitive { 0x10 } else { 0x00 });
        encode_string(&field.name, out);
        encode_string(&field.value, out);
    }
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    encode_integer(s.len(), 7, 0x00, out);
    out.extend_from_slice(s);
}

/// An integer with a `prefix`-bit prefix, its first byte's other bits `flags`.
pub(super) fn encode_integer(mut value: usize, prefix: u8, flags: u8, out: &mut Vec<u8>) {
    let mask = (1usize << prefix) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    value -= mask;
    while value >= 0x80 {
        out.push(0x80 | (value & 0x7f) as u8);
        value >>= 7;
    }
    out.push(value as u8);
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
        assert_eq!(d.size, 164);
        assert_eq!(d.table.len(), 3);
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
        assert_eq!(d.table.len(), 2);
        assert_eq!(pairs(&fields)[3], ("x", "cccccccccc"));
        assert_eq!(pairs(&fields)[4], ("x", "bbbbbbbbbb"));
        assert_eq!(d.decode(&[0xc0]), Err(HpackError::BadIndex(64)));
        // An entry larger than the table empties it.
        let mut big = vec![0x40, 0x01, b'y', 0x7f, 0x01];
        big.extend([b'z'; 128]);
        d.decode(&big).unwrap();
        assert!(d.table.is_empty());
        assert_eq!(d.size, 0);
    }

    #[test]
    fn refuses_malformed_blocks() {
        let mut d = Decoder::default();
        assert_eq!(d.decode(&[0x80]), Err(HpackError::BadIndex(0)));
        assert_eq!(d.decode(&[0x00, 0x05, b'a']), Err(HpackError::Truncated));
        assert_eq!(d.decode(&[0xff, 0xff]), Err(HpackError::Truncated));
        assert_eq!(
            d.decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            Err(HpackError::Overflow)
        );
        assert_eq!(d.decode(&[0x82, 0x20]), Err(HpackError::SizeUpdate));
        assert_eq!(
            d.decode(&[0x3f, 0xe1, 0xff, 0x04]),
            Err(HpackError::SizeUpdate)
        );
    }

    #[test]
    fn encodes_literals_that_decode_to_the_same_fields_and_index_nothing() {
        let fields = vec![
            Field {
                name: b":authority".to_vec(),
                value: b"localhost".to_vec(),
                sensitive: false,
            },
            Field {
                name: b"authorization".to_vec(),
                value: vec![b'k'; 300],
                sensitive: true,
            },
        ];
        let mut block = Vec::new();
        encode(&fields, &mut block);
        let mut d = Decoder::default();
        assert_eq!(d.decode(&block).unwrap(), fields);
        assert!(d.table.is_empty());
    }
}
