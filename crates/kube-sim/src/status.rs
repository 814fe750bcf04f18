//! API errors as the Kubernetes API server reports them: a [`ApiError`] carries
//! the HTTP code, the machine-readable `reason`, the human message and the
//! optional `details` (including field-level `causes`), and renders as a
//! `meta/v1 Status` object. [`FieldError`] mirrors apimachinery's
//! `field.Error`, whose text forms (`spec.x: Required value`, ...) clients and
//! people recognise.

use serde_json::{Value, json};

/// An error answered to a client as a `Status` object.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code (404, 409, 422, ...).
    pub code: u16,
    /// `Status.reason` (`NotFound`, `Conflict`, `Invalid`, ...).
    pub reason: String,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, when there are any.
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429 and injected faults).
    pub retry_after: Option<u64>,
}

/// `items` shown by `show` and joined with ", ", as the server lists
/// values in its messages.
pub fn comma_list<T>(items: impl IntoIterator<Item = T>, show: impl FnMut(T) -> String) -> String {
    items.into_iter().map(show).collect::<Vec<_>>().join(", ")
}

/// The `details` of an error about one named object.
fn object_details(gr: &GroupResource, name: &str) -> Value {
    json!({"name": name, "group": gr.group, "kind": gr.resource})
}

impl ApiError {
    /// A bare error with code, reason and message.
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// `<gr> "<name>" <what>`, with the object's details.
    fn about_object(code: u16, reason: &str, gr: &GroupResource, name: &str, what: &str) -> Self {
        ApiError::new(
            code,
            reason,
            format!("{} \"{name}\" {what}", gr.qualified()),
        )
        .with_details(object_details(gr, name))
    }

    fn with_details(mut self, mut details: Value) -> Self {
        // The API server leaves out empty names, groups and kinds.
        if let Some(fields) = details.as_object_mut() {
            fields.retain(|_, v| v.as_str() != Some(""));
        }
        self.details = Some(details);
        self
    }

    /// `404 NotFound`: `buckets.example.com "b1" not found`.
    pub fn not_found(gr: &GroupResource, name: &str) -> Self {
        ApiError::about_object(404, "NotFound", gr, name, "not found")
    }

    /// `404 NotFound` for a path that names no served resource.
    pub fn no_route() -> Self {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// `409 AlreadyExists`.
    pub fn already_exists(gr: &GroupResource, name: &str) -> Self {
        ApiError::about_object(409, "AlreadyExists", gr, name, "already exists")
    }

    /// `409 Conflict`: `Operation cannot be fulfilled on <gr> "<name>": <why>`.
    pub fn conflict(gr: &GroupResource, name: &str, why: &str) -> Self {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                gr.qualified()
            ),
        )
        .with_details(object_details(gr, name))
    }

    /// The conflict an update with a stale `resourceVersion` gets.
    pub fn stale(gr: &GroupResource, name: &str) -> Self {
        ApiError::conflict(
            gr,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// `422 Invalid` with field causes, worded like the real server.
    pub fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Self {
        let qualified = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let joined = if errors.len() == 1 {
            errors[0].to_string()
        } else {
            format!("[{}]", comma_list(errors, ToString::to_string))
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.kind.reason(), "message": e.body(), "field": e.field}))
            .collect();
        ApiError::new(
            422,
            "Invalid",
            format!("{qualified} \"{name}\" is invalid: {joined}"),
        )
        .with_details(json!({"name": name, "group": group, "kind": kind, "causes": causes}))
    }

    /// `400 BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    /// `401 Unauthorized`.
    pub fn unauthorized() -> Self {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// `403 Forbidden` with a prepared message.
    pub fn forbidden(message: impl Into<String>, details: Value) -> Self {
        ApiError::new(403, "Forbidden", message).with_details(details)
    }

    /// `405 MethodNotAllowed`.
    pub fn method_not_allowed() -> Self {
        ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// `415 UnsupportedMediaType` for patch content types.
    pub fn unsupported_patch(accepted: &[&str]) -> Self {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// `410 Expired` for a watch or list whose resourceVersion left the window.
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    /// `500 InternalError`.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(500, "InternalError", message)
    }

    /// `504 Timeout`.
    pub fn timeout(message: impl Into<String>) -> Self {
        ApiError::new(504, "Timeout", message)
    }

    /// The `meta/v1 Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            let mut details = details.clone();
            if let Some(secs) = self.retry_after {
                details["retryAfterSeconds"] = json!(secs);
            }
            status["details"] = details;
        } else if let Some(secs) = self.retry_after {
            status["details"] = json!({"retryAfterSeconds": secs});
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// A resource and its API group, as named in messages (`buckets.example.com`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource name.
    pub resource: String,
}

impl GroupResource {
    /// Builds a group/resource pair.
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }

    /// `resource.group`, or `resource` for the core group.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// The kinds of field error apimachinery knows, with their `reason`s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// A required field is missing.
    Required,
    /// A value is malformed or out of range.
    Invalid,
    /// A value is of the wrong JSON type.
    TypeInvalid,
    /// A value is not one of an enumeration.
    NotSupported,
    /// A change or value is not allowed.
    Forbidden,
    /// A string is too long.
    TooLong,
    /// A list or map has too many entries.
    TooMany,
    /// A list holds a value twice.
    Duplicate,
}

impl FieldErrorKind {
    /// The `StatusCause.reason` string.
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
        }
    }

    /// Whether an error of this kind keeps a custom resource's CEL rules
    /// from running (the object is too broken for them).
    pub fn blocks_cel(self) -> bool {
        matches!(
            self,
            FieldErrorKind::NotSupported
                | FieldErrorKind::Required
                | FieldErrorKind::TooLong
                | FieldErrorKind::TooMany
                | FieldErrorKind::TypeInvalid
        )
    }

    /// Parses a `reason` string (as CEL rules may name one).
    pub fn from_reason(reason: &str) -> Option<Self> {
        Some(match reason {
            "FieldValueRequired" => FieldErrorKind::Required,
            "FieldValueInvalid" => FieldErrorKind::Invalid,
            "FieldValueForbidden" => FieldErrorKind::Forbidden,
            "FieldValueDuplicate" => FieldErrorKind::Duplicate,
            _ => return None,
        })
    }
}

/// One field-level validation failure.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// What went wrong.
    pub kind: FieldErrorKind,
    /// Dotted path (`spec.items[0].name`).
    pub field: String,
    /// The offending value, already rendered (`"foo"`, `3`, `"object"`).
    pub value: Option<String>,
    /// Extra explanation.
    pub detail: String,
}

impl FieldError {
    /// Builds a field error.
    pub fn new(
        kind: FieldErrorKind,
        field: &str,
        value: Option<String>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError {
            kind,
            field: field.to_string(),
            value,
            detail: detail.into(),
        }
    }

    /// `Required value`.
    pub fn required(field: &str, detail: impl Into<String>) -> Self {
        FieldError::new(FieldErrorKind::Required, field, None, detail)
    }

    /// `Invalid value: <v>: <detail>`.
    pub fn invalid(field: &str, value: &Value, detail: impl Into<String>) -> Self {
        FieldError::new(
            FieldErrorKind::Invalid,
            field,
            Some(render_value(value)),
            detail,
        )
    }

    /// `Forbidden: <detail>`.
    pub fn forbidden(field: &str, detail: impl Into<String>) -> Self {
        FieldError::new(FieldErrorKind::Forbidden, field, None, detail)
    }

    /// The message without the field prefix (the `StatusCause.message`).
    pub fn body(&self) -> String {
        let with_detail = |head: String| {
            if self.detail.is_empty() {
                head
            } else {
                format!("{head}: {}", self.detail)
            }
        };
        // The type, then the value when there is one (the API server omits
        // the value of an object or a list).
        let with_value = |head: &str| match &self.value {
            Some(value) => format!("{head}: {value}"),
            None => head.to_owned(),
        };
        match self.kind {
            FieldErrorKind::Required => with_detail("Required value".into()),
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => {
                with_detail(with_value("Invalid value"))
            }
            FieldErrorKind::NotSupported => with_detail(with_value("Unsupported value")),
            FieldErrorKind::Forbidden => with_detail("Forbidden".into()),
            FieldErrorKind::TooLong => with_detail("Too long".into()),
            FieldErrorKind::TooMany => with_detail(with_value("Too many")),
            FieldErrorKind::Duplicate => with_value("Duplicate value"),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.body())
        } else {
            write!(f, "{}: {}", self.field, self.body())
        }
    }
}

/// Renders a JSON value the way apimachinery prints bad values: strings
/// quoted, numbers and booleans bare, objects and arrays by their type name.
pub fn render_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        Value::Array(_) => "\"array\"".into(),
        Value::Object(_) => "\"object\"".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_with_one_cause_is_not_bracketed() {
        let err = ApiError::invalid(
            "Widget",
            "example.com",
            "w1",
            &[FieldError::required("spec.size", "")],
        );
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "Widget.example.com \"w1\" is invalid: spec.size: Required value"
        );
        let status = err.to_status();
        assert_eq!(status["details"]["causes"][0]["field"], "spec.size");
        assert_eq!(
            status["details"]["causes"][0]["reason"],
            "FieldValueRequired"
        );
    }

    #[test]
    fn invalid_with_several_causes_is_bracketed() {
        let err = ApiError::invalid(
            "Widget",
            "example.com",
            "w1",
            &[
                FieldError::required("spec.a", ""),
                FieldError::invalid("spec.b", &json!("x"), "bad"),
            ],
        );
        assert!(
            err.message
                .ends_with("[spec.a: Required value, spec.b: Invalid value: \"x\": bad]")
        );
    }

    #[test]
    fn not_found_names_the_group_resource() {
        let err = ApiError::not_found(&GroupResource::new("", "secrets"), "s");
        assert_eq!(err.message, "secrets \"s\" not found");
        let err = ApiError::not_found(&GroupResource::new("example.com", "widgets"), "w");
        assert_eq!(err.message, "widgets.example.com \"w\" not found");
    }
}
