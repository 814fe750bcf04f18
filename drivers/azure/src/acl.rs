//! A container's stored access policies (its "ACL"), as Get and Set
//! Container ACL carry them: a list of at most five signed identifiers,
//! each with an optional start, an expiry and a permission string.
//!
//! Policies the driver did not write (an admin's, another tool's) are kept
//! as they are, text for text, whenever the driver rewrites the list.

use crate::xml;

/// How many stored access policies Azure allows on one container. Azurite
/// does not enforce it; the driver does.
pub const MAX_POLICIES: usize = 5;

/// One stored access policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The signed identifier (up to 64 characters).
    pub id: String,
    /// When tokens start to be valid, ISO 8601; `None` when unset.
    pub start: Option<String>,
    /// When tokens expire, ISO 8601; `None` when unset.
    pub expiry: Option<String>,
    /// The permissions, e.g. `racwdl`.
    pub permission: String,
}

/// The stored access policies of a container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Acl {
    /// The policies, in the order the service reported them.
    pub policies: Vec<Policy>,
}

impl Acl {
    /// Parses a `SignedIdentifiers` document (an empty body is no policy).
    pub fn parse(doc: &str) -> Result<Acl, String> {
        if doc.trim().is_empty() {
            return Ok(Acl::default());
        }
        if !doc.contains("<SignedIdentifiers") {
            return Err("the answer is not a SignedIdentifiers document".into());
        }
        let mut policies = Vec::new();
        for block in xml::elements(doc, "SignedIdentifier") {
            let id = xml::first(block, "Id")
                .filter(|id| !id.is_empty())
                .ok_or("a SignedIdentifier has no Id")?;
            let non_empty = |name| xml::first(block, name).filter(|v: &String| !v.is_empty());
            policies.push(Policy {
                id,
                start: non_empty("Start"),
                expiry: non_empty("Expiry"),
                permission: non_empty("Permission").unwrap_or_default(),
            });
        }
        Ok(Acl { policies })
    }

    /// The `SignedIdentifiers` document of Set Container ACL.
    pub fn render(&self) -> String {
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?><SignedIdentifiers>");
        for p in &self.policies {
            out.push_str("<SignedIdentifier><Id>");
            out.push_str(&xml::escape(&p.id));
            out.push_str("</Id><AccessPolicy>");
            if let Some(start) = &p.start {
                out.push_str(&format!("<Start>{}</Start>", xml::escape(start)));
            }
            if let Some(expiry) = &p.expiry {
                out.push_str(&format!("<Expiry>{}</Expiry>", xml::escape(expiry)));
            }
            out.push_str(&format!(
                "<Permission>{}</Permission></AccessPolicy></SignedIdentifier>",
                xml::escape(&p.permission)
            ));
        }
        out.push_str("</SignedIdentifiers>");
        out
    }

    /// The policy `id`.
    pub fn get(&self, id: &str) -> Option<&Policy> {
        self.policies.iter().find(|p| p.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn azure_documents_are_read_and_written_back_unchanged() {
        let doc = "\u{feff}<?xml version=\"1.0\" encoding=\"utf-8\"?><SignedIdentifiers><SignedIdentifier>\
                   <Id>MTIzNDU2Nzg5MDEyMzQ1Njc4OTAxMjM0NTY3ODkwMTI=</Id><AccessPolicy>\
                   <Start>2009-09-28T08:49:37.0000000Z</Start><Expiry>2009-09-29T08:49:37.0000000Z</Expiry>\
                   <Permission>rwd</Permission></AccessPolicy></SignedIdentifier><SignedIdentifier><Id>ba-1</Id>\
                   <AccessPolicy><Start></Start><Expiry>2026-12-04T03:21:10Z</Expiry><Permission>rl</Permission>\
                   </AccessPolicy></SignedIdentifier></SignedIdentifiers>";
        let acl = Acl::parse(doc).unwrap();
        assert_eq!(acl.policies.len(), 2);
        assert_eq!(acl.policies[0].permission, "rwd");
        assert_eq!(
            acl.policies[0].start.as_deref(),
            Some("2009-09-28T08:49:37.0000000Z")
        );
        let ours = acl.get("ba-1").unwrap();
        assert_eq!(
            (ours.start.as_deref(), ours.permission.as_str()),
            (None, "rl")
        );
        assert_eq!(Acl::parse(&acl.render()).unwrap(), acl);
    }

    #[test]
    fn an_empty_list_and_garbage_are_told_apart() {
        assert_eq!(Acl::parse("").unwrap(), Acl::default());
        let empty = "<?xml version=\"1.0\" encoding=\"utf-8\"?><SignedIdentifiers />";
        assert_eq!(Acl::parse(empty).unwrap(), Acl::default());
        assert!(Acl::parse("<html>busy</html>").is_err());
        assert!(
            Acl::parse("<SignedIdentifiers><SignedIdentifier><AccessPolicy/></SignedIdentifier></SignedIdentifiers>")
                .is_err()
        );
    }
}
