//! The rewriter on frames as clients write them.

use loona_hpack::encoder::encode_integer_into;

use super::hpack::{Decoder, Field};
use super::*;

const SOCKET_AUTHORITY: &str = "tmp%2Fcosi%2Fcosi.sock";

/// [`SOCKET_AUTHORITY`] Huffman-coded (RFC 7541, Appendix B).
const SOCKET_AUTHORITY_HUFFMAN: [u8; 16] = [
    0x4d, 0x35, 0xaa, 0x2c, 0x24, 0x3a, 0x0c, 0xa8, 0xb0, 0x90, 0xe8, 0x32, 0xe8, 0x39, 0x3a, 0xff,
];

/// An integer with a `prefix`-bit prefix, its first byte's other bits `flags`.
fn integer(value: usize, prefix: u8, flags: u8, out: &mut Vec<u8>) {
    encode_integer_into(value, prefix, flags, out).unwrap();
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

/// A literal field with a new name, not Huffman-coded; `first` is its
/// representation's first byte (0x40 indexed, 0x00 not, 0x10 never).
fn literal(first: u8, name: &str, value: &str) -> Vec<u8> {
    let mut out = vec![first];
    for s in [name, value] {
        integer(s.len(), 7, 0x00, &mut out);
        out.extend(s.as_bytes());
    }
    out
}

/// A gRPC request's fields after `:authority`, as grpc-core writes them.
fn grpc_rest() -> Vec<u8> {
    let mut b = vec![0x83, 0x86]; // :method POST, :scheme http
    b.extend(literal(
        0x00,
        ":path",
        "/cosi.v1alpha2.Identity/DriverGetInfo",
    ));
    b.extend(literal(0x00, "content-type", "application/grpc"));
    b.extend(literal(0x00, "te", "trailers"));
    b
}

fn rewrite(input: &[u8]) -> Result<Vec<u8>, RewriteError> {
    let mut r = Rewriter::default();
    let mut out = BytesMut::new();
    r.feed(input, &mut out)?;
    Ok(out.to_vec())
}

/// A frame as the server reads it.
#[derive(Debug, PartialEq)]
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    payload: Vec<u8>,
}

fn frames(mut bytes: &[u8]) -> Vec<Frame> {
    bytes = bytes.strip_prefix(PREFACE).expect("the preface first");
    let mut frames = Vec::new();
    while !bytes.is_empty() {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        frames.push(Frame {
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes(bytes[5..9].try_into().unwrap()),
            payload: bytes[9..9 + len].to_vec(),
        });
        bytes = &bytes[9 + len..];
    }
    frames
}

/// The header blocks the server decodes, by stream, each alone (no block
/// names what another indexed) and each plain literals (written again the
/// same, so none is indexed or Huffman-coded).
fn blocks(bytes: &[u8]) -> Vec<(u32, Vec<(String, String)>)> {
    let mut out = Vec::new();
    let mut block = Vec::new();
    for f in frames(bytes) {
        match f.kind {
            HEADERS => {
                assert_eq!(f.flags & PADDED, 0);
                let skip = if f.flags & PRIORITY != 0 { 5 } else { 0 };
                block = f.payload[skip..].to_vec();
            }
            CONTINUATION => block.extend(&f.payload),
            _ => continue,
        }
        assert!(f.payload.len() <= MAX_FRAME);
        if f.flags & END_HEADERS != 0 {
            let fields = Decoder::default().decode(&block).unwrap();
            let mut again = Vec::new();
            hpack::encode(&fields, &mut again);
            assert_eq!(again, block, "plain literals only");
            out.push((f.stream, fields.iter().map(text).collect()));
        }
    }
    out
}

fn text(f: &Field) -> (String, String) {
    (
        String::from_utf8(f.name.clone()).unwrap(),
        String::from_utf8(f.value.clone()).unwrap(),
    )
}

fn authority(fields: &[(String, String)]) -> &str {
    &fields.iter().find(|(n, _)| n == ":authority").unwrap().1
}

fn connection(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = PREFACE.to_vec();
    bytes.extend(frame(0x4, 0, 0, &[])); // SETTINGS
    for f in frames {
        bytes.extend(f);
    }
    bytes
}

#[test]
fn a_percent_encoded_authority_becomes_localhost() {
    let mut block = literal(0x00, ":authority", SOCKET_AUTHORITY);
    block.extend(grpc_rest());
    let out = rewrite(&connection(&[frame(HEADERS, END_HEADERS, 1, &block)])).unwrap();
    let blocks = blocks(&out);
    assert_eq!(blocks.len(), 1);
    assert_eq!(authority(&blocks[0].1), "localhost");
    assert_eq!(
        blocks[0].1[1..],
        [
            (":method".into(), "POST".into()),
            (":scheme".into(), "http".into()),
            (
                ":path".into(),
                "/cosi.v1alpha2.Identity/DriverGetInfo".into()
            ),
            ("content-type".into(), "application/grpc".into()),
            ("te".into(), "trailers".into()),
        ]
    );
}

#[test]
fn a_huffman_coded_authority_is_decoded_and_replaced() {
    let coded = SOCKET_AUTHORITY_HUFFMAN;
    // :authority by static name index 1, not indexed, value Huffman-coded.
    let mut block = vec![0x01];
    integer(coded.len(), 7, 0x80, &mut block);
    block.extend(&coded);
    let decoded = Decoder::default().decode(&block).unwrap();
    assert_eq!(decoded[0].value, SOCKET_AUTHORITY.as_bytes());
    block.extend(grpc_rest());
    let out = rewrite(&connection(&[frame(HEADERS, END_HEADERS, 1, &block)])).unwrap();
    assert_eq!(authority(&blocks(&out)[0].1), "localhost");
}

#[test]
fn an_authority_indexed_for_later_requests_is_replaced_in_each() {
    // The first request adds it to the dynamic table (literal with
    // incremental indexing, name index 1); the next ones name it by index
    // 62, or by index 63 once another entry came after it.
    let mut first = vec![0x41];
    integer(SOCKET_AUTHORITY.len(), 7, 0x00, &mut first);
    first.extend(SOCKET_AUTHORITY.as_bytes());
    first.extend(grpc_rest());
    let mut second = vec![0xbe];
    second.extend(grpc_rest());
    let mut third = literal(0x40, "grpc-timeout", "5S");
    third.push(0xbf);
    third.extend(grpc_rest());
    let out = rewrite(&connection(&[
        frame(HEADERS, END_HEADERS, 1, &first),
        frame(HEADERS, END_HEADERS, 3, &second),
        frame(HEADERS, END_HEADERS, 5, &third),
    ]))
    .unwrap();
    let blocks = blocks(&out);
    assert_eq!(
        blocks.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        [1, 3, 5]
    );
    for (_, fields) in &blocks {
        assert_eq!(authority(fields), "localhost");
    }
    assert_eq!(blocks[2].1[0], ("grpc-timeout".into(), "5S".into()));
}

#[test]
fn an_acceptable_authority_is_kept_as_the_client_sent_it() {
    // RFC 7541, C.4.1 and C.4.2: www.example.com, Huffman-coded, then indexed.
    let c41 = [
        0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90,
        0xf4, 0xff,
    ];
    let c42 = [
        0x82, 0x86, 0x84, 0xbe, 0x58, 0x86, 0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf,
    ];
    let mut localhost = literal(0x00, ":authority", "localhost:50051");
    localhost.extend(grpc_rest());
    let out = rewrite(&connection(&[
        frame(HEADERS, END_HEADERS | END_STREAM, 1, &c41),
        frame(HEADERS, END_HEADERS | END_STREAM, 3, &c42),
        frame(HEADERS, END_HEADERS, 5, &localhost),
    ]))
    .unwrap();
    let blocks = blocks(&out);
    assert_eq!(authority(&blocks[0].1), "www.example.com");
    assert_eq!(authority(&blocks[1].1), "www.example.com");
    assert_eq!(blocks[1].1[4], ("cache-control".into(), "no-cache".into()));
    assert_eq!(authority(&blocks[2].1), "localhost:50051");
}

#[test]
fn a_block_in_continuations_with_padding_and_priority_is_joined() {
    let mut block = literal(0x00, ":authority", SOCKET_AUTHORITY);
    block.extend(grpc_rest());
    let (a, rest) = block.split_at(7);
    let (b, c) = rest.split_at(20);
    // HEADERS: pad length 3, priority (exclusive, depends on 0, weight 16),
    // the first fragment, 3 bytes of padding.
    let mut headers = vec![3, 0x80, 0, 0, 0, 15];
    headers.extend(a);
    headers.extend([0; 3]);
    let out = rewrite(&connection(&[
        frame(HEADERS, PADDED | PRIORITY | END_STREAM, 1, &headers),
        frame(CONTINUATION, 0, 1, b),
        frame(CONTINUATION, END_HEADERS, 1, c),
    ]))
    .unwrap();
    let written = frames(&out);
    assert_eq!(written.len(), 2, "SETTINGS, then the block in one frame");
    let h = &written[1];
    assert_eq!(
        (h.kind, h.flags, h.stream),
        (HEADERS, END_STREAM | PRIORITY | END_HEADERS, 1)
    );
    assert_eq!(h.payload[..5], [0x80, 0, 0, 0, 15]);
    let blocks = blocks(&out);
    assert_eq!(authority(&blocks[0].1), "localhost");
    assert_eq!(blocks[0].1.len(), 6);
}

#[test]
fn a_block_larger_than_a_frame_is_written_in_continuations() {
    let mut block = literal(0x00, ":authority", SOCKET_AUTHORITY);
    block.extend(grpc_rest());
    // 5 bits each Huffman-coded (00011): 8 of them in 5 bytes.
    let big = "a".repeat(20_000);
    let coded = [0x18, 0xc6, 0x31, 0x8c, 0x63].repeat(20_000 / 8);
    block.extend(literal(0x00, "x-big", ""));
    block.pop(); // the empty value's length, replaced by a Huffman-coded one
    integer(coded.len(), 7, 0x80, &mut block);
    block.extend(&coded);
    assert!(block.len() < MAX_FRAME, "the client's frame fits");
    let out = rewrite(&connection(&[frame(HEADERS, END_HEADERS, 1, &block)])).unwrap();
    let kinds: Vec<_> = frames(&out)[1..]
        .iter()
        .map(|f| (f.kind, f.flags))
        .collect();
    assert_eq!(kinds, [(HEADERS, 0), (CONTINUATION, END_HEADERS)]);
    let blocks = blocks(&out);
    assert_eq!(blocks[0].1.last().unwrap().1, big);
}

#[test]
fn other_frames_pass_through_unchanged_however_the_bytes_arrive() {
    let mut block = literal(0x00, ":authority", "localhost");
    block.extend(grpc_rest());
    let data = frame(0x0, END_STREAM, 1, &[0, 0, 0, 0, 3, 1, 2, 3]);
    let window = frame(0x8, 0, 0, &[0, 1, 0, 0]);
    let input = connection(&[
        frame(HEADERS, END_HEADERS, 1, &block),
        data.clone(),
        window.clone(),
    ]);
    let whole = rewrite(&input).unwrap();
    assert!(whole.ends_with(&[data, window].concat()));
    let mut r = Rewriter::default();
    let mut out = BytesMut::new();
    for b in &input {
        r.feed(std::slice::from_ref(b), &mut out).unwrap();
    }
    assert_eq!(out.to_vec(), whole);
}

#[test]
fn bytes_that_are_not_http2_pass_through() {
    let http1 = b"GET / HTTP/1.1\r\nHost: %2Ftmp\r\n\r\n";
    assert_eq!(rewrite(http1).unwrap(), http1);
    let mut r = Rewriter::default();
    let mut out = BytesMut::new();
    r.feed(&PREFACE[..10], &mut out).unwrap();
    assert!(out.is_empty(), "a partial preface waits");
    r.feed(b"x", &mut out).unwrap();
    assert_eq!(out.to_vec(), [&PREFACE[..10], b"x"].concat());
}

#[test]
fn malformed_header_frames_are_refused() {
    let block = literal(0x00, ":authority", SOCKET_AUTHORITY);
    let cases = [
        vec![
            frame(HEADERS, 0, 1, &block),
            frame(0x0, END_STREAM, 1, &[0; 5]),
        ],
        vec![frame(CONTINUATION, END_HEADERS, 1, &block)],
        vec![
            frame(HEADERS, 0, 1, &block),
            frame(CONTINUATION, END_HEADERS, 3, &[]),
        ],
        vec![frame(HEADERS, PADDED | END_HEADERS, 1, &[200, 0x82])],
        vec![frame(HEADERS, END_HEADERS, 1, &[0xc0])],
        vec![frame(HEADERS, END_HEADERS, 1, &[0x00, 0x81, 0xff, 0x00])],
    ];
    for frames in cases {
        assert!(rewrite(&connection(&frames)).is_err(), "{frames:?}");
    }
}
