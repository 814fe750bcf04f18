//! What `plan` finds and `apply`/`finish` did: the plan (each source
//! object and what it becomes, each problem with what to fix) and the
//! closing summary, rendered as text or as the YAML apply would write.

use std::fmt::Write as _;

/// Every source object and what it becomes, and what blocks `apply`.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// One entry per source object that is carried over.
    pub items: Vec<Item>,
    /// What blocks `apply`, each saying what to fix.
    pub problems: Vec<Problem>,
    /// What `apply` will do beyond the items (made safe, relinked, …).
    pub notes: Vec<String>,
}

/// One source object and what it becomes.
#[derive(Clone, Debug)]
pub struct Item {
    /// The source object, e.g. `ObjectBucketClaim default/photos`.
    pub source: String,
    /// One line per thing it becomes or keeps.
    pub becomes: Vec<String>,
    /// The objects `apply` writes for it.
    pub writes: Vec<serde_json::Value>,
}

/// Something that blocks `apply`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The object it is about.
    pub object: String,
    /// What is wrong and what to do about it.
    pub message: String,
}

impl Problem {
    /// A problem with `object`.
    pub fn new(object: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            object: object.into(),
            message: message.into(),
        }
    }
}

impl Plan {
    /// The plan as lines for a terminal.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for item in &self.items {
            let _ = writeln!(out, "{}", item.source);
            for line in &item.becomes {
                let _ = writeln!(out, "  -> {line}");
            }
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        for p in &self.problems {
            let _ = writeln!(out, "problem: {}: {}", p.object, p.message);
        }
        let _ = writeln!(
            out,
            "{} object(s) to migrate, {} problem(s){}",
            self.items.len(),
            self.problems.len(),
            if self.problems.is_empty() {
                ": apply can run"
            } else {
                ": fix them, then run plan again"
            }
        );
        out
    }

    /// The objects `apply` would write, as a YAML stream.
    pub fn yaml(&self) -> Result<String, serde_saphyr::ser::Error> {
        let mut out = String::new();
        for object in self.items.iter().flat_map(|i| &i.writes) {
            out.push_str("---\n");
            out.push_str(&serde_saphyr::to_string(object)?);
        }
        Ok(out)
    }
}

/// What a step did, printed at its end.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Objects carried over (or removed, for finish).
    pub migrated: usize,
    /// Objects left alone, each with why.
    pub skipped: Vec<(String, String)>,
    /// Backend buckets confirmed to exist and be usable through cosi-rs.
    pub buckets_confirmed: usize,
}

impl Summary {
    /// The summary as lines for a terminal.
    pub fn text(&self, verb: &str) -> String {
        let mut out = format!(
            "{} object(s) {verb}, {} skipped, {} bucket(s) confirmed\n",
            self.migrated,
            self.skipped.len(),
            self.buckets_confirmed
        );
        for (what, why) in &self.skipped {
            let _ = writeln!(out, "  skipped {what}: {why}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        Plan {
            items: vec![Item {
                source: "ObjectBucketClaim default/photos".into(),
                becomes: vec!["Bucket obc-default-photos".into()],
                writes: vec![serde_json::json!({"kind": "Bucket", "metadata": {"name": "b"}})],
            }],
            problems: vec![],
            notes: vec!["made safe".into()],
        }
    }

    #[test]
    fn text_says_whether_apply_can_run() {
        let mut p = plan();
        let text = p.text();
        assert!(text.contains("  -> Bucket obc-default-photos"), "{text}");
        assert!(text.contains("note: made safe"), "{text}");
        assert!(text.ends_with("1 object(s) to migrate, 0 problem(s): apply can run\n"));
        p.problems.push(Problem::new("StorageClass x", "map it"));
        let text = p.text();
        assert!(text.contains("problem: StorageClass x: map it"), "{text}");
        assert!(text.ends_with("fix them, then run plan again\n"), "{text}");
    }

    #[test]
    fn yaml_is_a_stream_of_the_written_objects() {
        let yaml = plan().yaml().unwrap();
        assert!(yaml.starts_with("---\n"), "{yaml}");
        assert!(yaml.contains("kind: Bucket"), "{yaml}");
    }

    #[test]
    fn summary_lists_what_was_skipped() {
        let s = Summary {
            migrated: 2,
            skipped: vec![("OBC a/b".into(), "not Bound".into())],
            buckets_confirmed: 2,
        };
        assert_eq!(
            s.text("migrated"),
            "2 object(s) migrated, 1 skipped, 2 bucket(s) confirmed\n  skipped OBC a/b: not Bound\n"
        );
    }
}
