//! Label and field selectors: parsing the query-string syntax
//! (`a=b,c!=d,e in (x,y),f notin (z),g,!h`) and matching objects against
//! them. Field selectors compare dotted paths such as `metadata.name` or
//! `involvedObject.uid` as strings; a missing field reads as "".

use serde_json::Value;

/// One label requirement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelReq {
    /// `key=value` / `key==value`.
    Eq(String, String),
    /// `key!=value` (also matches when the key is absent).
    NotEq(String, String),
    /// `key in (v1,v2)`.
    In(String, Vec<String>),
    /// `key notin (v1,v2)` (also matches when the key is absent).
    NotIn(String, Vec<String>),
    /// `key`.
    Exists(String),
    /// `!key`.
    NotExists(String),
    /// `key>n` / `key<n` (integer comparison).
    Gt(String, i64),
    /// `key<n`.
    Lt(String, i64),
}

/// A parsed label selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelReq>);

impl LabelSelector {
    /// Parses the `labelSelector` query syntax.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_label_req(part)?);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches(&self, labels: Option<&serde_json::Map<String, Value>>) -> bool {
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::Gt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            LabelReq::Lt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn check_key(k: &str) -> Result<String, String> {
    let k = k.trim();
    if k.is_empty() || k.contains(char::is_whitespace) {
        return Err(format!("invalid label key {k:?}"));
    }
    Ok(k.to_string())
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesised set, found {rest:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn parse_label_req(part: &str) -> Result<LabelReq, String> {
    if let Some(k) = part.strip_prefix('!') {
        return Ok(LabelReq::NotExists(check_key(k)?));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(LabelReq::NotEq(check_key(k)?, v.trim().to_string()));
    }
    if let Some((k, v)) = part.split_once("==") {
        return Ok(LabelReq::Eq(check_key(k)?, v.trim().to_string()));
    }
    if let Some((k, v)) = part.split_once('=') {
        return Ok(LabelReq::Eq(check_key(k)?, v.trim().to_string()));
    }
    type Bound = fn(String, i64) -> LabelReq;
    let bounds: [(char, Bound); 2] = [('>', LabelReq::Gt), ('<', LabelReq::Lt)];
    for (op, requirement) in bounds {
        if let Some((k, v)) = part.split_once(op) {
            let n = v
                .trim()
                .parse()
                .map_err(|_| format!("invalid number {v:?}"))?;
            return Ok(requirement(check_key(k)?, n));
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let rest = words[1].trim_start();
        if let Some(set) = rest.strip_prefix("notin") {
            return Ok(LabelReq::NotIn(check_key(words[0])?, parse_set(set)?));
        }
        if let Some(set) = rest.strip_prefix("in") {
            return Ok(LabelReq::In(check_key(words[0])?, parse_set(set)?));
        }
        return Err(format!("unable to parse requirement: {part:?}"));
    }
    if let Some(idx) = part.find('(') {
        let (k, set) = part.split_at(idx);
        if let Some(k) = k.strip_suffix("notin") {
            return Ok(LabelReq::NotIn(check_key(k)?, parse_set(set)?));
        }
        if let Some(k) = k.strip_suffix("in") {
            return Ok(LabelReq::In(check_key(k)?, parse_set(set)?));
        }
    }
    Ok(LabelReq::Exists(check_key(part)?))
}

/// One field requirement: `path=value` or `path!=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldReq {
    /// Dotted field path.
    pub path: String,
    /// Compared value.
    pub value: String,
    /// `!=` rather than `=`.
    pub negate: bool,
}

/// A parsed field selector: every requirement must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<FieldReq>);

impl FieldSelector {
    /// Parses the `fieldSelector` query syntax.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (path, value, negate) = if let Some((k, v)) = part.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, v, false)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, v, false)
            } else {
                return Err(format!(
                    "invalid selector: '{part}'; can't understand '{part}'"
                ));
            };
            reqs.push(FieldReq {
                path: path.trim().to_string(),
                value: v_unescape(value.trim()),
                negate,
            });
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether the object satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|r| {
            let actual = field_value(obj, &r.path);
            (actual == r.value) != r.negate
        })
    }

    /// The single `metadata.name=X` this selector pins, if it pins one.
    pub fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|r| r.path == "metadata.name" && !r.negate)
            .map(|r| r.value.as_str())
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn v_unescape(v: &str) -> String {
    v.replace("\\,", ",")
        .replace("\\=", "=")
        .replace("\\\\", "\\")
}

/// The string value at a dotted path ("" when absent; numbers and booleans
/// printed).
pub fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn every_label_operator_parses_and_matches() {
        let l = labels(json!({"app": "web", "tier": "front", "n": "5"}));
        let cases = [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("missing!=x", true),
            ("app in (web, api)", true),
            ("app in (api)", false),
            ("app notin (api)", true),
            ("missing notin (api)", true),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
            ("n>4", true),
            ("n<4", false),
            ("", true),
        ];
        for (sel, want) in cases {
            let parsed = LabelSelector::parse(sel).unwrap();
            assert_eq!(parsed.matches(Some(&l)), want, "{sel}");
        }
    }

    #[test]
    fn malformed_label_selectors_are_rejected() {
        assert!(LabelSelector::parse("app in web").is_err());
        assert!(LabelSelector::parse("a b").is_err());
    }

    #[test]
    fn field_selectors_compare_dotted_paths() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}, "type": "Opaque"});
        assert!(
            FieldSelector::parse("metadata.name=a")
                .unwrap()
                .matches(&obj)
        );
        assert!(
            FieldSelector::parse("metadata.name==a,metadata.namespace=ns")
                .unwrap()
                .matches(&obj)
        );
        assert!(
            !FieldSelector::parse("metadata.name!=a")
                .unwrap()
                .matches(&obj)
        );
        assert!(FieldSelector::parse("type=Opaque").unwrap().matches(&obj));
        assert!(FieldSelector::parse("spec.x=").unwrap().matches(&obj));
        assert_eq!(
            FieldSelector::parse("metadata.name=a")
                .unwrap()
                .pinned_name(),
            Some("a")
        );
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
