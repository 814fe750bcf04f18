//! The small JSONPath subset CRD `additionalPrinterColumns` use:
//! `.a.b`, `.a[0]`, `.a[*].b` and filters `[?(@.type=="Ready")]`. Evaluation
//! returns every match; printer columns print the first one.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter {
        path: Vec<String>,
        value: String,
        negate: bool,
    },
}

/// A parsed JSONPath expression.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath(Vec<Step>);

impl JsonPath {
    /// Parses `.a.b[0][?(@.x=="y")].c` (a leading `$` or braces are allowed).
    pub fn parse(expr: &str) -> Result<Self, String> {
        let mut s = expr.trim();
        if let Some(inner) = s.strip_prefix('{').and_then(|r| r.strip_suffix('}')) {
            s = inner.trim();
        }
        s = s.strip_prefix('$').unwrap_or(s);
        let mut steps = Vec::new();
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'.' => {
                    let (field, j) = field_at(s, i + 1);
                    if !field.is_empty() {
                        steps.push(Step::Field(field));
                    }
                    i = j;
                }
                b'[' => {
                    let end = find_close(s, i).ok_or_else(|| format!("unclosed [ in {expr:?}"))?;
                    let inner = s[i + 1..end].trim();
                    steps.push(parse_bracket(inner)?);
                    i = end + 1;
                }
                _ => {
                    let (field, j) = field_at(s, i);
                    steps.push(Step::Field(field));
                    i = j;
                }
            }
        }
        Ok(JsonPath(steps))
    }

    /// Every value the path selects.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut cur = vec![root];
        for step in &self.0 {
            let mut next = Vec::new();
            for v in cur {
                match step {
                    Step::Field(f) => {
                        if let Some(x) = v.get(f) {
                            next.push(x);
                        }
                    }
                    Step::Index(n) => {
                        if let Some(x) = v.get(*n) {
                            next.push(x);
                        }
                    }
                    Step::All => match v {
                        Value::Array(a) => next.extend(a.iter()),
                        Value::Object(m) => next.extend(m.values()),
                        _ => {}
                    },
                    Step::Filter {
                        path,
                        value,
                        negate,
                    } => {
                        if let Value::Array(a) = v {
                            for item in a {
                                let mut x = Some(item);
                                for p in path {
                                    x = x.and_then(|x| x.get(p));
                                }
                                let s = match x {
                                    Some(Value::String(s)) => Some(s.clone()),
                                    Some(Value::Null) | None => None,
                                    Some(other) => Some(other.to_string()),
                                };
                                if (s.as_deref() == Some(value.as_str())) != *negate {
                                    next.push(item);
                                }
                            }
                        }
                    }
                }
            }
            cur = next;
        }
        cur
    }
}

/// The field name starting at byte `start`, up to the next unescaped `.`
/// or `[`, and the byte after it. `\.` is a dot inside the name, as in
/// `.metadata.annotations.example\.com/key`.
fn field_at(s: &str, start: usize) -> (String, usize) {
    let b = s.as_bytes();
    let mut field = String::new();
    let mut j = start;
    let mut from = start;
    while j < b.len() && b[j] != b'.' && b[j] != b'[' {
        if b[j] == b'\\' && b.get(j + 1) == Some(&b'.') {
            field.push_str(&s[from..j]);
            field.push('.');
            j += 2;
            from = j;
            continue;
        }
        j += 1;
    }
    field.push_str(&s[from..j]);
    (field, j)
}

fn find_close(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0;
    let mut in_str: Option<char> = None;
    for (i, c) in s[open..].char_indices() {
        if let Some(q) = in_str {
            if c == q {
                in_str = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => in_str = Some(c),
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(open + i);
                }
            }
            _ => {}
        }
    }
    None
}

fn parse_bracket(inner: &str) -> Result<Step, String> {
    if inner == "*" {
        return Ok(Step::All);
    }
    if let Ok(n) = inner.parse::<usize>() {
        return Ok(Step::Index(n));
    }
    if let Some(quoted) = inner
        .strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .or_else(|| inner.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
    {
        return Ok(Step::Field(quoted.to_string()));
    }
    let filter = inner
        .strip_prefix("?(")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| format!("unsupported JSONPath segment [{inner}]"))?;
    let (lhs, rhs, negate) = if let Some((l, r)) = filter.split_once("!=") {
        (l, r, true)
    } else if let Some((l, r)) = filter.split_once("==") {
        (l, r, false)
    } else {
        return Err(format!("unsupported JSONPath filter {filter:?}"));
    };
    let lhs = lhs.trim();
    let path = lhs
        .strip_prefix("@.")
        .ok_or_else(|| format!("unsupported JSONPath filter {filter:?}"))?
        .split('.')
        .map(String::from)
        .collect();
    let rhs = rhs.trim();
    let value = rhs
        .strip_prefix('"')
        .and_then(|r| r.strip_suffix('"'))
        .or_else(|| rhs.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')))
        .unwrap_or(rhs)
        .to_string();
    Ok(Step::Filter {
        path,
        value,
        negate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn condition_filters_select_the_status() {
        let obj = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "Provisioned", "status": "True"}
        ]}});
        let p = JsonPath::parse(r#".status.conditions[?(@.type=="Provisioned")].status"#).unwrap();
        assert_eq!(p.find(&obj), vec![&json!("True")]);
    }

    #[test]
    fn fields_indices_and_wildcards_work() {
        let obj = json!({"spec": {"items": [{"n": 1}, {"n": 2}]}});
        assert_eq!(
            JsonPath::parse(".spec.items[1].n").unwrap().find(&obj),
            vec![&json!(2)]
        );
        assert_eq!(
            JsonPath::parse("{.spec.items[*].n}")
                .unwrap()
                .find(&obj)
                .len(),
            2
        );
        assert!(
            JsonPath::parse(".spec.missing")
                .unwrap()
                .find(&obj)
                .is_empty()
        );
        assert!(JsonPath::parse(".a[?(x)]").is_err());
    }

    #[test]
    fn escaped_dots_stay_in_the_field_name() {
        let obj = json!({"metadata": {"annotations": {"cosi-rs.dev/rotated-at": "t"}}});
        let p = JsonPath::parse(r".metadata.annotations.cosi-rs\.dev/rotated-at").unwrap();
        assert_eq!(p.find(&obj), vec![&json!("t")]);
        let unescaped = JsonPath::parse(".metadata.annotations.cosi-rs.dev/rotated-at").unwrap();
        assert!(unescaped.find(&obj).is_empty());
    }
}
