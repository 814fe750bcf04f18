//! Cutting `metadata.managedFields` out of JSON text before it is parsed.
//!
//! The components never read field ownership, yet every watch event and
//! every write response carries it. It is about half the bytes of a COSI
//! object, and the costliest half to parse: each `fieldsV1` becomes a tree
//! of `serde_json::Value`s, built and then dropped. [`strip`] removes
//! it with one scan that builds nothing. [`Lines`] applies that to a
//! response body as it arrives, one JSON document per line (a watch
//! stream, or a whole response).
//!
//! Text the scan cannot follow as one JSON value is passed on unchanged,
//! so the parser reports on exactly what the server sent.

use std::ops::Range;

use bytes::Bytes;

/// The name of the member removed.
const NAME: &[u8] = b"managedFields";

/// The member's name as it appears in JSON text.
const KEY: &[u8] = b"\"managedFields\"";

/// Nesting deeper than this is passed on unchanged (the JSON parser's own
/// limit is 128 as well).
const MAX_DEPTH: usize = 128;

/// Removes from `doc` the `managedFields` member of any object that is
/// the value of a `metadata` member. Returns whether anything was removed;
/// if not, `doc` is left as it is.
pub fn strip(doc: &mut Vec<u8>) -> bool {
    let len = doc.len();
    let end = strip_within(doc, 0..len, 0);
    doc.truncate(end);
    end != len
}

/// Strips the document `text[doc]` as [`strip`] does and moves what is
/// kept to start at `to` (at most `doc.start`), without copying the text
/// elsewhere. Returns where the kept text ends.
fn strip_within(text: &mut [u8], doc: Range<usize>, mut to: usize) -> usize {
    let mut at = doc.start;
    for cut in cuts(&text[doc.clone()]) {
        let (start, end) = (doc.start + cut.start, doc.start + cut.end);
        text.copy_within(at..start, to);
        to += start - at;
        at = end;
    }
    text.copy_within(at..doc.end, to);
    to + (doc.end - at)
}

/// Strips each line of `text` (a document per line, each but perhaps the
/// last ending in a newline) as [`strip`] does, in place.
fn strip_lines(text: &mut Vec<u8>) {
    let mut to = 0;
    let mut at = 0;
    while at < text.len() {
        let (line_end, next) = match memchr::memchr(b'\n', &text[at..]) {
            Some(i) => (at + i, at + i + 1),
            None => (text.len(), text.len()),
        };
        to = strip_within(text, at..line_end, to);
        if next > line_end {
            text[to] = b'\n';
            to += 1;
        }
        at = next;
    }
    text.truncate(to);
}

/// The byte ranges to remove from `doc`, in order and disjoint; none when
/// `doc` has no `managedFields` or is not one well-formed JSON value.
fn cuts(doc: &[u8]) -> Vec<Range<usize>> {
    if memchr::memmem::find(doc, KEY).is_none() {
        return Vec::new();
    }
    let mut scan = Scan {
        b: doc,
        i: 0,
        cuts: Vec::new(),
    };
    match scan.value(0, false) {
        Some(()) if scan.at_end() => scan.cuts,
        _ => Vec::new(),
    }
}

/// A JSON scanner that only records where the members to remove are.
/// Every method returns `None` on text that is not JSON.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
    cuts: Vec<Range<usize>>,
}

impl Scan<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.i == self.b.len()
    }

    /// Skips `c` after optional whitespace.
    fn expect(&mut self, c: u8) -> Option<()> {
        self.skip_ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// Scans one value; `metadata` tells whether it is the value of a
    /// `metadata` member.
    fn value(&mut self, depth: usize, metadata: bool) -> Option<()> {
        self.skip_ws();
        match self.peek()? {
            b'{' => self.object(depth + 1, metadata),
            b'[' => self.array(depth + 1),
            b'"' => self.string().map(|_| ()),
            _ => self.scalar(),
        }
    }

    /// A number, `true`, `false` or `null`: checked only for its extent.
    fn scalar(&mut self) -> Option<()> {
        let start = self.i;
        while let Some(c) = self.peek() {
            match c {
                b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r' => break,
                b'-' | b'+' | b'.' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' => self.i += 1,
                _ => return None,
            }
        }
        (self.i > start).then_some(())
    }

    /// A string; returns the range of its raw contents.
    fn string(&mut self) -> Option<Range<usize>> {
        let start = self.i + 1;
        let mut at = start;
        loop {
            let end = at + memchr::memchr2(b'"', b'\\', self.b.get(at..)?)?;
            if self.b[end] == b'\\' {
                at = end + 2;
                continue;
            }
            self.i = end + 1;
            return Some(start..end);
        }
    }

    /// Steps into an array or object that ends with `close`; returns
    /// whether it is empty (and so already closed).
    fn open(&mut self, depth: usize, close: u8) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        self.skip_ws();
        let empty = self.peek()? == close;
        if empty {
            self.i += 1;
        }
        Some(empty)
    }

    /// Steps over the `,` after an element, or the `close` after the last
    /// one; returns whether it was the last.
    fn separator(&mut self, close: u8) -> Option<bool> {
        self.skip_ws();
        let last = match self.peek()? {
            b',' => false,
            c if c == close => true,
            _ => return None,
        };
        self.i += 1;
        Some(last)
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        if self.open(depth, b']')? {
            return Some(());
        }
        loop {
            self.value(depth, false)?;
            if self.separator(b']')? {
                return Some(());
            }
        }
    }

    fn object(&mut self, depth: usize, metadata: bool) -> Option<()> {
        if self.open(depth, b'}')? {
            return Some(());
        }
        // Where the comma before the current member is, if one is kept.
        let mut comma_before = None;
        loop {
            self.skip_ws();
            if self.peek()? != b'"' {
                return None;
            }
            let member_start = self.i;
            let text = self.b;
            let key = &text[self.string()?];
            self.expect(b':')?;
            self.value(depth, key == b"metadata")?;
            let member_end = self.i;
            let remove = metadata && key == NAME;
            let last = self.separator(b'}')?;
            if remove {
                // With the comma before it; or, as the first member, with
                // the comma after it (and the space up to the next key).
                let cut = match comma_before {
                    Some(comma) => comma..member_end,
                    None if last => member_start..member_end,
                    None => {
                        self.skip_ws();
                        member_start..self.i
                    }
                };
                // Anything cut inside the member goes with it.
                while self.cuts.last().is_some_and(|c| c.start >= cut.start) {
                    self.cuts.pop();
                }
                self.cuts.push(cut);
            } else if !last {
                comma_before = Some(self.i - 1);
            }
            if last {
                return Some(());
            }
        }
    }
}

/// Splits a body into lines as it arrives, and strips each complete line
/// as [`strip`] does. A line is only passed on once it is complete, so
/// nothing waits but the unfinished end of a chunk.
///
/// The chunks of an unfinished line are held as they arrived and joined
/// once, when it ends, into a buffer of its exact size that is then
/// stripped in place: a list response (one line of several MB) costs its
/// size once more while it is stripped, not the copies and doublings of a
/// growing buffer.
#[derive(Debug, Default)]
pub struct Lines {
    held: Vec<Bytes>,
}

impl Lines {
    /// Takes the next chunk of the body; returns the complete lines it
    /// finishes, stripped, with their newlines (empty if it finishes none).
    pub fn push(&mut self, chunk: Bytes) -> Bytes {
        let Some(last_newline) = memchr::memrchr(b'\n', &chunk) else {
            self.hold(chunk);
            return Bytes::new();
        };
        let complete = chunk.slice(..=last_newline);
        let rest = chunk.slice(last_newline + 1..);
        if self.held.is_empty() && memchr::memmem::find(&complete, KEY).is_none() {
            // Nothing to strip and nothing held: pass the bytes on as they are.
            self.hold(rest);
            return complete;
        }
        let mut text = self.joined(&complete);
        self.hold(rest);
        strip_lines(&mut text);
        text.into()
    }

    /// Ends the body: returns the last line, stripped, if it had no newline.
    pub fn finish(&mut self) -> Bytes {
        if self.held.is_empty() {
            return Bytes::new();
        }
        let mut text = self.joined(&[]);
        strip(&mut text);
        text.into()
    }

    /// Keeps `chunk` (part of an unfinished line) until the line ends.
    fn hold(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.held.push(chunk);
        }
    }

    /// The held chunks and `last`, in one buffer; each chunk is let go
    /// once copied.
    fn joined(&mut self, last: &[u8]) -> Vec<u8> {
        let len = self.held.iter().map(Bytes::len).sum::<usize>() + last.len();
        let mut text = Vec::with_capacity(len);
        for chunk in self.held.drain(..) {
            text.extend_from_slice(&chunk);
        }
        text.extend_from_slice(last);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn strip(doc: &str) -> String {
        let mut text = doc.as_bytes().to_vec();
        let removed = super::strip(&mut text);
        assert_eq!(removed, text.len() != doc.len(), "{doc}");
        String::from_utf8(text).unwrap()
    }

    #[test]
    fn managed_fields_are_cut_from_metadata_wherever_they_stand() {
        let mf = r#""managedFields":[{"manager":"a","fieldsV1":{"f:spec":{"f:x":{}}}}]"#;
        for (doc, want) in [
            (
                format!(r#"{{"metadata":{{"name":"n",{mf},"uid":"u"}},"spec":{{}}}}"#),
                r#"{"metadata":{"name":"n","uid":"u"},"spec":{}}"#,
            ),
            (
                format!(r#"{{"metadata":{{{mf},"name":"n"}}}}"#),
                r#"{"metadata":{"name":"n"}}"#,
            ),
            (
                format!(r#"{{"metadata":{{"name":"n",{mf}}}}}"#),
                r#"{"metadata":{"name":"n"}}"#,
            ),
            (format!(r#"{{"metadata":{{{mf}}}}}"#), r#"{"metadata":{}}"#),
            (
                format!(r#"{{ "metadata" : {{ "a" : 1 , {mf} , "b" : 2 }} }}"#),
                r#"{ "metadata" : { "a" : 1  , "b" : 2 } }"#,
            ),
            (
                format!(r#"{{"metadata" : {{ {mf} ,  "b":2}}}}"#),
                r#"{"metadata" : { "b":2}}"#,
            ),
            // A watch event, and each item of a list.
            (
                format!(r#"{{"type":"ADDED","object":{{"metadata":{{{mf},"name":"n"}}}}}}"#),
                r#"{"type":"ADDED","object":{"metadata":{"name":"n"}}}"#,
            ),
            (
                format!(
                    r#"{{"metadata":{{"resourceVersion":"5"}},"items":[{{"metadata":{{{mf}}}}},{{"metadata":{{"name":"b",{mf}}}}}]}}"#
                ),
                r#"{"metadata":{"resourceVersion":"5"},"items":[{"metadata":{}},{"metadata":{"name":"b"}}]}"#,
            ),
        ] {
            assert_eq!(strip(&doc), want, "{doc}");
        }
    }

    #[test]
    fn only_the_member_of_a_metadata_object_is_cut() {
        for doc in [
            r#"{"spec":{"managedFields":[1]},"metadata":{"name":"n"}}"#,
            r#"{"managedFields":[1]}"#,
            r#"{"metadata":[{"managedFields":[1]}]}"#,
            r#"{"metadata":{"labels":{"managedFields":"x"}}}"#,
            r#"{"metadata":{"annotations":{"a":"\"managedFields\":[]"}}}"#,
            r#"{"metadata":{"managedFieldsX":[]}}"#,
        ] {
            assert_eq!(strip(doc), doc);
        }
    }

    #[test]
    fn text_that_is_not_one_json_value_passes_unchanged() {
        for doc in [
            r#"{"metadata":{"managedFields":[]}"#,
            r#"{"metadata":{"managedFields":[]}} {}"#,
            r#"{"metadata":{"managedFields":[}}}"#,
            r#"{"metadata":{"managedFields":[1}}}"#,
            r#"{"metadata":{"managedFields":[],"a":{"b":1]}}"#,
            r#"{"metadata":{"managedFields":[] "a":1}}"#,
            r#"{"metadata":{"managedFields" []}}"#,
            r#"{"metadata":{"managedFields":[],}}"#,
            r#"{"metadata":{"managedFields":["\"]}}"#,
            r#"{"metadata":{"managedFields":[@]}}"#,
            "  \"managedFields\": [",
        ] {
            assert_eq!(strip(doc), doc);
        }
        let deep = format!(
            r#"{{"metadata":{{"managedFields":{}1{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        assert_eq!(strip(&deep), deep);
    }

    #[test]
    fn a_cut_inside_a_cut_goes_with_it() {
        let doc = r#"{"metadata":{"a":1,"managedFields":[{"metadata":{"managedFields":[],"b":1}}],"c":2}}"#;
        assert_eq!(strip(doc), r#"{"metadata":{"a":1,"c":2}}"#);
    }

    /// Stripping equals parsing, removing the member, and serializing, for
    /// objects whose `metadata` members come in every order.
    #[test]
    fn stripped_text_parses_as_the_object_without_managed_fields() {
        let members = [
            ("name", json!("photos")),
            (
                "managedFields",
                json!([{"manager": "m", "fieldsV1": {"f:a": {}}}]),
            ),
            ("labels", json!({"managedFields": "kept"})),
            ("resourceVersion", json!("7")),
        ];
        for rotation in 0..members.len() {
            for len in 1..=members.len() {
                let mut meta = serde_json::Map::new();
                for k in 0..len {
                    let (key, value) = &members[(rotation + k) % members.len()];
                    meta.insert((*key).to_owned(), value.clone());
                }
                let object = json!({"kind": "BucketClaim", "metadata": meta, "spec": {"x": [1, 2.5, null, true]}});
                for text in [
                    serde_json::to_string(&object).unwrap(),
                    serde_json::to_string_pretty(&object).unwrap(),
                ] {
                    let mut want = object.clone();
                    want["metadata"]
                        .as_object_mut()
                        .unwrap()
                        .remove("managedFields");
                    let got: Value = serde_json::from_str(&strip(&text)).unwrap();
                    assert_eq!(got, want, "{text}");
                }
            }
        }
    }

    fn lines_of(chunks: &[&str]) -> String {
        let mut lines = Lines::default();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend_from_slice(&lines.push(Bytes::copy_from_slice(chunk.as_bytes())));
        }
        out.extend_from_slice(&lines.finish());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn lines_are_stripped_across_chunk_borders() {
        let a = r#"{"type":"ADDED","object":{"metadata":{"name":"a","managedFields":[{"m":1}]}}}"#;
        let b = r#"{"type":"MODIFIED","object":{"metadata":{"managedFields":[],"name":"b"}}}"#;
        let want = concat!(
            r#"{"type":"ADDED","object":{"metadata":{"name":"a"}}}"#,
            "\n",
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"b"}}}"#,
            "\n"
        );
        let stream = format!("{a}\n{b}\n");
        for cut1 in 0..=stream.len() {
            for cut2 in (cut1..=stream.len()).step_by(7) {
                let chunks = [&stream[..cut1], &stream[cut1..cut2], &stream[cut2..]];
                assert_eq!(lines_of(&chunks), want, "cut at {cut1}, {cut2}");
            }
        }
    }

    #[test]
    fn lines_with_and_without_a_cut_keep_their_order_and_newlines() {
        let cut = r#"{"metadata":{"managedFields":[{"m":1}],"name":"a"}}"#;
        let plain = r#"{"metadata":{"name":"b"}}"#;
        let stream = format!("{plain}\n{cut}\n\n{plain}\n{cut}\n{plain}");
        let want = format!(
            "{plain}\n{0}\n\n{plain}\n{0}\n{plain}",
            r#"{"metadata":{"name":"a"}}"#
        );
        for at in 0..=stream.len() {
            assert_eq!(
                lines_of(&[&stream[..at], &stream[at..]]),
                want,
                "cut at {at}"
            );
        }
    }

    #[test]
    fn a_last_line_without_newline_and_plain_lines_are_kept() {
        assert_eq!(
            lines_of(&[r#"{"metadata":{"managedFields":[]"#, "}}"]),
            r#"{"metadata":{}}"#
        );
        assert_eq!(
            lines_of(&["{\"a\":1}\n", "{\"b\"", ":2}\n"]),
            "{\"a\":1}\n{\"b\":2}\n"
        );
        assert_eq!(lines_of(&[]), "");
    }

    #[test]
    fn a_chunk_with_nothing_to_strip_is_passed_on_without_a_copy() {
        let mut lines = Lines::default();
        let chunk = Bytes::from_static(b"{\"a\":1}\n{\"b\":");
        let out = lines.push(chunk.clone());
        assert_eq!(out, "{\"a\":1}\n");
        assert_eq!(out.as_ptr(), chunk.as_ptr());
        assert_eq!(lines.push(Bytes::from_static(b"2}\n")), "{\"b\":2}\n");
    }
}
