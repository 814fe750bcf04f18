//! Requests' `:authority`, made acceptable to the HTTP/2 server under tonic.
//!
//! A gRPC client on a UNIX socket has no host to name, and implementations
//! disagree on what to send as `:authority`: grpc-go and `@grpc/grpc-js`
//! send `localhost`, but gRPC's C core (under the Python, C++, Ruby and PHP
//! clients) sends the socket path percent-encoded (`tmp%2Fd%2Fcosi.sock`)
//! and grpc-java sends something alike. The `h2` crate turns `:authority`
//! into an `http::uri::Authority`, whose parser refuses a `%` outside the
//! userinfo or an IPv6 zone, and so resets every such stream with
//! `PROTOCOL_ERROR` (`h2::server`'s `convert_poll_message`,
//! hyperium/h2#487) before any service runs. Neither h2, hyper nor tonic
//! has a setting that relaxes it.
//!
//! [`NormalizedAuthority`] wraps each accepted connection and rewrites the
//! client's request headers before h2 reads them, replacing an
//! `:authority` that `http` would refuse with `localhost`, what grpc-go
//! sends. A byte-level substitution cannot work: HPACK may Huffman-code the
//! value, take it from the static or the dynamic table, or add it to the
//! dynamic table for later requests to name by index. So the wrapper
//! decodes every header block (HEADERS and its CONTINUATIONs) with
//! `loona-hpack`'s decoder, which keeps the dynamic table in step with the
//! client's encoder, and writes each block again as literals that are
//! neither indexed nor Huffman-coded: h2's decoder then never has a dynamic table, so the two
//! tables never need to agree. Every other frame, and everything the server
//! writes, passes through untouched. Dropping `:authority` (it is optional
//! in HTTP/2) would need the same decoding and lose the value; a patched h2
//! would be a fork of a crate every other part of the workspace shares.
//!
//! Bytes that do not start with the HTTP/2 preface pass through as they
//! are, for h2 to refuse. A header block that does not decode, or a frame
//! between a HEADERS and its CONTINUATION, is an error h2 would have made a
//! connection error too: the read fails and the connection closes. So does
//! a block past bounds no gRPC client comes near: 64 KiB as sent, 16 MiB
//! decoded, a dynamic table of more than 64 KiB. The first bound also
//! bounds the time one block can take to decode (the HPACK crate's Huffman
//! decoding is slow on a block built of many tiny strings: well under a
//! second at 64 KiB).

mod hpack;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

pub use hpack::HpackError;

/// What an `:authority` that `http` refuses is replaced with: what grpc-go
/// sends on a UNIX socket.
pub const REPLACEMENT_AUTHORITY: &str = "localhost";

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const FRAME_HEADER_LEN: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;

/// The largest frame payload written: SETTINGS_MAX_FRAME_SIZE's initial
/// value, which every server accepts.
const MAX_FRAME: usize = 16_384;

/// The largest header block (compressed, across its frames) held while it
/// is incomplete. gRPC clients send a few hundred bytes; hyper's servers
/// accept a decoded header list of 16 KiB by default.
const MAX_BLOCK: usize = 64 << 10;

/// Why a client's bytes could not be rewritten.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    /// A header block did not decode.
    #[error("cannot decode a request's headers: {0}")]
    Hpack(#[from] HpackError),
    /// Frames that break HTTP/2's rules for header blocks.
    #[error("malformed HTTP/2 header frames: {0}")]
    Frame(&'static str),
}

impl From<RewriteError> for io::Error {
    fn from(e: RewriteError) -> Self {
        io::Error::new(io::ErrorKind::InvalidData, e)
    }
}

/// The client-to-server byte stream's rewriter, apart from any I/O: fed
/// what the client sent, it appends what the server should read.
#[derive(Debug, Default)]
pub struct Rewriter {
    state: State,
    input: BytesMut,
    decoder: hpack::Decoder,
    block: Option<PendingBlock>,
}

#[derive(Debug, Default, PartialEq, Eq)]
enum State {
    /// Before the whole preface has arrived.
    #[default]
    Preface,
    /// At a frame header.
    Frames,
    /// Inside a frame passed through as it is: this many bytes left.
    Passing(usize),
    /// Not HTTP/2 with prior knowledge: everything passes.
    Passthrough,
}

/// A HEADERS frame waiting for its CONTINUATIONs.
#[derive(Debug)]
struct PendingBlock {
    stream: u32,
    flags: u8,
    priority: Option<[u8; 5]>,
    fragment: Vec<u8>,
}

impl Rewriter {
    /// Takes `input` from the client and appends to `out` every byte the
    /// server can be given so far.
    pub fn feed(&mut self, input: &[u8], out: &mut BytesMut) -> Result<(), RewriteError> {
        self.input.extend_from_slice(input);
        loop {
            match self.state {
                State::Passthrough => {
                    out.extend_from_slice(&self.input.split());
                    return Ok(());
                }
                State::Preface => {
                    let n = self.input.len().min(PREFACE.len());
                    if self.input[..n] != PREFACE[..n] {
                        self.state = State::Passthrough;
                    } else if n == PREFACE.len() {
                        out.extend_from_slice(&self.input.split_to(n));
                        self.state = State::Frames;
                    } else {
                        return Ok(());
                    }
                }
                State::Passing(left) => {
                    let n = left.min(self.input.len());
                    out.extend_from_slice(&self.input.split_to(n));
                    if n == left {
                        self.state = State::Frames;
                    } else {
                        self.state = State::Passing(left - n);
                        return Ok(());
                    }
                }
                State::Frames => {
                    let Some(&header) = self.input.first_chunk::<FRAME_HEADER_LEN>() else {
                        return Ok(());
                    };
                    let len = usize::from(header[0]) << 16
                        | usize::from(header[1]) << 8
                        | usize::from(header[2]);
                    let kind = header[3];
                    if kind != HEADERS && kind != CONTINUATION {
                        if self.block.is_some() {
                            return Err(RewriteError::Frame(
                                "a frame other than CONTINUATION inside a header block",
                            ));
                        }
                        out.extend_from_slice(&self.input.split_to(FRAME_HEADER_LEN));
                        self.state = State::Passing(len);
                        continue;
                    }
                    if self.input.len() < FRAME_HEADER_LEN + len {
                        return Ok(());
                    }
                    let flags = header[4];
                    let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]])
                        & 0x7fff_ffff;
                    self.input.advance(FRAME_HEADER_LEN);
                    let payload = self.input.split_to(len);
                    self.header_frame(kind, flags, stream, &payload, out)?;
                }
            }
        }
    }

    fn header_frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        mut payload: &[u8],
        out: &mut BytesMut,
    ) -> Result<(), RewriteError> {
        if kind == HEADERS {
            if self.block.is_some() {
                return Err(RewriteError::Frame("HEADERS inside a header block"));
            }
            let mut pad = 0;
            if flags & PADDED != 0 {
                let (&n, rest) = payload
                    .split_first()
                    .ok_or(RewriteError::Frame("HEADERS too short for its padding"))?;
                pad = usize::from(n);
                payload = rest;
            }
            let mut priority = None;
            if flags & PRIORITY != 0 {
                let (p, rest) = payload
                    .split_first_chunk::<5>()
                    .ok_or(RewriteError::Frame("HEADERS too short for its priority"))?;
                priority = Some(*p);
                payload = rest;
            }
            let fragment = payload
                .len()
                .checked_sub(pad)
                .map(|n| &payload[..n])
                .ok_or(RewriteError::Frame("HEADERS padding longer than the frame"))?;
            self.block = Some(PendingBlock {
                stream,
                flags,
                priority,
                fragment: fragment.to_vec(),
            });
        } else {
            let block = self
                .block
                .as_mut()
                .filter(|b| b.stream == stream)
                .ok_or(RewriteError::Frame("CONTINUATION outside a header block"))?;
            block.fragment.extend_from_slice(payload);
        }
        let block = self
            .block
            .as_ref()
            .expect("a block was just started or continued");
        if block.fragment.len() > MAX_BLOCK {
            return Err(RewriteError::Frame("header block larger than 64 KiB"));
        }
        if flags & END_HEADERS != 0 {
            let block = self.block.take().expect("checked above");
            self.write_block(block, out)?;
        }
        Ok(())
    }

    /// Decodes a whole block, replaces a refused `:authority`, and writes it
    /// as one HEADERS frame and as many CONTINUATIONs as it needs.
    fn write_block(&mut self, block: PendingBlock, out: &mut BytesMut) -> Result<(), RewriteError> {
        let mut fields = self.decoder.decode(&block.fragment)?;
        for field in &mut fields {
            if field.name == b":authority" && !acceptable(&field.value) {
                field.value = REPLACEMENT_AUTHORITY.into();
            }
        }
        let mut encoded = block.priority.map(Vec::from).unwrap_or_default();
        hpack::encode(&fields, &mut encoded);
        let mut chunks = encoded.chunks(MAX_FRAME).peekable();
        let mut kind = HEADERS;
        let mut flags = block.flags & (END_STREAM | PRIORITY);
        // An empty block still takes one frame.
        let first: &[u8] = &[];
        let mut chunk = chunks.next().unwrap_or(first);
        loop {
            let last = chunks.peek().is_none();
            if last {
                flags |= END_HEADERS;
            }
            let len = chunk.len() as u32;
            out.extend_from_slice(&len.to_be_bytes()[1..]);
            out.extend_from_slice(&[kind, flags]);
            out.extend_from_slice(&block.stream.to_be_bytes());
            out.extend_from_slice(chunk);
            match chunks.next() {
                Some(next) => chunk = next,
                None => return Ok(()),
            }
            (kind, flags) = (CONTINUATION, 0);
        }
    }
}

/// True when h2 takes `value` as an authority.
fn acceptable(value: &[u8]) -> bool {
    http::uri::Authority::try_from(value).is_ok()
}

/// A server-side connection whose requests' `:authority` h2 accepts: see
/// the [module documentation](self). [`crate::serve`] wraps every
/// connection of the driver's socket in it; wrap the connections of a
/// tonic server of your own the same way (`Server::serve_with_incoming`).
#[derive(Debug)]
pub struct NormalizedAuthority<S> {
    inner: S,
    rewriter: Rewriter,
    /// Rewritten bytes not read yet.
    ready: BytesMut,
    scratch: Box<[u8]>,
}

impl<S> NormalizedAuthority<S> {
    /// Wraps a connection accepted from a client.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            rewriter: Rewriter::default(),
            ready: BytesMut::new(),
            scratch: vec![0; MAX_FRAME].into_boxed_slice(),
        }
    }

    /// The wrapped connection.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for NormalizedAuthority<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // Read until there is something to hand over, or the end.
        while this.ready.is_empty() {
            let mut scratch = ReadBuf::new(&mut this.scratch);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut scratch))?;
            if scratch.filled().is_empty() {
                return Poll::Ready(Ok(()));
            }
            this.rewriter.feed(scratch.filled(), &mut this.ready)?;
        }
        let n = this.ready.len().min(buf.remaining());
        buf.put_slice(&this.ready.split_to(n));
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for NormalizedAuthority<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<S: Connected> Connected for NormalizedAuthority<S> {
    type ConnectInfo = S::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests;
