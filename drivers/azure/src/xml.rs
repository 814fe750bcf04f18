//! The little XML the driver reads and writes: Azure's flat documents
//! (container ACLs, blob listings, error responses). Elements are found by
//! name, without nesting of the same name, which none of these documents
//! has; text is unescaped (the five entities and character references).

/// Escapes text for an element's content.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

/// Unescapes an element's text.
pub fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';') else {
            break;
        };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            _ => entity
                .strip_prefix("#x")
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .or_else(|| entity.strip_prefix('#').and_then(|d| d.parse().ok()))
                .and_then(char::from_u32),
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The raw content of every `<name>` element of `doc`, in order; an empty
/// element (`<name/>`) has empty content.
pub fn elements<'a>(doc: &'a str, name: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let open = format!("<{name}");
    let close = format!("</{name}>");
    let mut rest = doc;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        // `<Name` must not be the start of a longer name (`<NameX>`).
        let Some(tag_end) = after.find('>') else {
            break;
        };
        let next = after.chars().next();
        if !matches!(next, Some('>' | '/' | ' ' | '\t' | '\r' | '\n')) {
            rest = after;
            continue;
        }
        if after[..tag_end].ends_with('/') {
            out.push("");
            rest = &after[tag_end + 1..];
            continue;
        }
        let content = &after[tag_end + 1..];
        let Some(end) = content.find(&close) else {
            break;
        };
        out.push(&content[..end]);
        rest = &content[end + close.len()..];
    }
    out
}

/// The unescaped text of the first `<name>` element of `doc`.
pub fn first(doc: &str, name: &str) -> Option<String> {
    elements(doc, name).first().map(|s| unescape(s.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips_through_escaping() {
        let text = r#"a<b>&"c"'d'"#;
        assert_eq!(unescape(&escape(text)), text);
        assert_eq!(unescape("x&#65;&#x42;&unknown;&"), "xAB&unknown;&");
    }

    #[test]
    fn elements_are_found_by_exact_name() {
        let doc = "<Root a=\"1\"><Blobs><Blob><Name>a&amp;b</Name></Blob><Blob><Name>c</Name></Blob>\
                   </Blobs><Empty/><NameX>no</NameX></Root>";
        assert_eq!(elements(doc, "Blob").len(), 2);
        let names: Vec<String> = elements(doc, "Name").iter().map(|s| unescape(s)).collect();
        assert_eq!(names, ["a&b", "c"]);
        assert_eq!(elements(doc, "Empty"), [""]);
        assert_eq!(first(doc, "Missing"), None);
        assert_eq!(elements(doc, "Root").len(), 1);
    }
}
