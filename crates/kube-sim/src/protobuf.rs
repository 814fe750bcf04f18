//! Decoding of Kubernetes protobuf request bodies for the built-in kinds
//! kubectl creates with its typed clients (`kubectl create namespace`,
//! `secret`, `configmap`, `serviceaccount`, `role`, `rolebinding`,
//! `token`, `auth can-i`): the `k8s\0` envelope (`runtime.Unknown`) and a
//! field table per kind, turned into the same JSON the server would get
//! from a JSON client. Responses are always JSON, which those clients accept.

use base64::Engine;
use serde_json::{Map, Value, json};

/// The magic prefix of Kubernetes protobuf bodies.
pub const MAGIC: &[u8] = b"k8s\0";

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Bytes,
    Int,
    Bool,
    MapStr,
    MapBytes,
    Msg(&'static [Field]),
}

#[derive(Clone, Copy)]
struct Field {
    num: u64,
    name: &'static str,
    kind: Kind,
    repeated: bool,
}

const fn f(num: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        num,
        name,
        kind,
        repeated: false,
    }
}

const fn r(num: u64, name: &'static str, kind: Kind) -> Field {
    Field {
        num,
        name,
        kind,
        repeated: true,
    }
}

/// Fields 1, 2, ... holding one string each, named in order.
const fn strings<const N: usize>(names: [&'static str; N]) -> [Field; N] {
    let mut out = [f(0, "", Kind::Str); N];
    let mut i = 0;
    while i < N {
        out[i] = f(i as u64 + 1, names[i], Kind::Str);
        i += 1;
    }
    out
}

/// Fields 1, 2, ... holding lists of strings, named in order.
const fn repeated_strings<const N: usize>(names: [&'static str; N]) -> [Field; N] {
    let mut out = strings(names);
    let mut i = 0;
    while i < N {
        out[i].repeated = true;
        i += 1;
    }
    out
}

const OWNER_REF: &[Field] = &[
    f(1, "kind", Kind::Str),
    f(3, "name", Kind::Str),
    f(4, "uid", Kind::Str),
    f(5, "apiVersion", Kind::Str),
    f(6, "controller", Kind::Bool),
    f(7, "blockOwnerDeletion", Kind::Bool),
];

const OBJECT_META: &[Field] = &[
    f(1, "name", Kind::Str),
    f(2, "generateName", Kind::Str),
    f(3, "namespace", Kind::Str),
    f(5, "uid", Kind::Str),
    f(6, "resourceVersion", Kind::Str),
    f(7, "generation", Kind::Int),
    f(11, "labels", Kind::MapStr),
    f(12, "annotations", Kind::MapStr),
    r(13, "ownerReferences", Kind::Msg(OWNER_REF)),
    r(14, "finalizers", Kind::Str),
];

const OBJECT_REF: &[Field] = &strings([
    "kind",
    "namespace",
    "name",
    "uid",
    "apiVersion",
    "resourceVersion",
    "fieldPath",
]);

const LOCAL_REF: &[Field] = &[f(1, "name", Kind::Str)];

const NAMESPACE: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "spec", Kind::Msg(&[r(1, "finalizers", Kind::Str)])),
];

const SECRET: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "data", Kind::MapBytes),
    f(3, "type", Kind::Str),
    f(4, "stringData", Kind::MapStr),
    f(5, "immutable", Kind::Bool),
];

const CONFIG_MAP: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(2, "data", Kind::MapStr),
    f(3, "binaryData", Kind::MapBytes),
    f(4, "immutable", Kind::Bool),
];

const SERVICE_ACCOUNT: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    r(2, "secrets", Kind::Msg(OBJECT_REF)),
    r(3, "imagePullSecrets", Kind::Msg(LOCAL_REF)),
    f(4, "automountServiceAccountToken", Kind::Bool),
];

const BOUND_REF: &[Field] = &strings(["kind", "apiVersion", "name", "uid"]);

const TOKEN_REQUEST: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(
        2,
        "spec",
        Kind::Msg(&[
            r(1, "audiences", Kind::Str),
            f(3, "boundObjectRef", Kind::Msg(BOUND_REF)),
            f(4, "expirationSeconds", Kind::Int),
        ]),
    ),
];

const RESOURCE_ATTRIBUTES: &[Field] = &strings([
    "namespace",
    "verb",
    "group",
    "version",
    "resource",
    "subresource",
    "name",
]);

const NON_RESOURCE_ATTRIBUTES: &[Field] = &strings(["path", "verb"]);

const SELF_SUBJECT_ACCESS_REVIEW: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    f(
        2,
        "spec",
        Kind::Msg(&[
            f(1, "resourceAttributes", Kind::Msg(RESOURCE_ATTRIBUTES)),
            f(
                2,
                "nonResourceAttributes",
                Kind::Msg(NON_RESOURCE_ATTRIBUTES),
            ),
        ]),
    ),
];

const POLICY_RULE: &[Field] = &repeated_strings([
    "verbs",
    "apiGroups",
    "resources",
    "resourceNames",
    "nonResourceURLs",
]);

const ROLE: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    r(2, "rules", Kind::Msg(POLICY_RULE)),
];

const SUBJECT: &[Field] = &strings(["kind", "apiGroup", "name", "namespace"]);

const ROLE_REF: &[Field] = &strings(["apiGroup", "kind", "name"]);

const ROLE_BINDING: &[Field] = &[
    f(1, "metadata", Kind::Msg(OBJECT_META)),
    r(2, "subjects", Kind::Msg(SUBJECT)),
    f(3, "roleRef", Kind::Msg(ROLE_REF)),
];

const TYPE_META: &[Field] = &strings(["apiVersion", "kind"]);

const UNKNOWN: &[Field] = &[
    f(1, "typeMeta", Kind::Msg(TYPE_META)),
    f(2, "raw", Kind::Bytes),
    f(3, "contentEncoding", Kind::Str),
    f(4, "contentType", Kind::Str),
];

fn table_for(kind: &str) -> Option<&'static [Field]> {
    Some(match kind {
        "Namespace" => NAMESPACE,
        "Secret" => SECRET,
        "ConfigMap" => CONFIG_MAP,
        "ServiceAccount" => SERVICE_ACCOUNT,
        "TokenRequest" => TOKEN_REQUEST,
        "SelfSubjectAccessReview" => SELF_SUBJECT_ACCESS_REVIEW,
        "Role" | "ClusterRole" => ROLE,
        "RoleBinding" | "ClusterRoleBinding" => ROLE_BINDING,
        _ => return None,
    })
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err("varint too long".into())
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let len = usize::try_from(self.varint()?).map_err(|_| "length overflow")?;
        let end = self
            .pos
            .checked_add(len)
            .filter(|e| *e <= self.buf.len())
            .ok_or("truncated field")?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn skip(&mut self, wire: u64) -> Result<(), String> {
        match wire {
            0 => self.varint().map(drop),
            1 => self.advance(8),
            2 => self.bytes().map(drop),
            5 => self.advance(4),
            _ => Err(format!("unsupported wire type {wire}")),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), String> {
        if self.pos + n > self.buf.len() {
            return Err("truncated field".into());
        }
        self.pos += n;
        Ok(())
    }
}

fn decode_map_entry(bytes: &[u8], value_kind: Kind) -> Result<(String, Value), String> {
    let mut rd = Reader { buf: bytes, pos: 0 };
    let mut key = String::new();
    let mut value = json!("");
    while rd.pos < rd.buf.len() {
        let tag = rd.varint()?;
        match (tag >> 3, tag & 7) {
            (1, 2) => key = String::from_utf8_lossy(rd.bytes()?).into_owned(),
            (2, 2) => {
                let b = rd.bytes()?;
                value = match value_kind {
                    Kind::MapBytes => json!(base64::engine::general_purpose::STANDARD.encode(b)),
                    _ => json!(String::from_utf8_lossy(b)),
                };
            }
            (_, wire) => rd.skip(wire)?,
        }
    }
    Ok((key, value))
}

fn decode_message(bytes: &[u8], fields: &[Field]) -> Result<Map<String, Value>, String> {
    let mut rd = Reader { buf: bytes, pos: 0 };
    let mut out = Map::new();
    while rd.pos < rd.buf.len() {
        let tag = rd.varint()?;
        let (num, wire) = (tag >> 3, tag & 7);
        let Some(field) = fields.iter().find(|f| f.num == num) else {
            rd.skip(wire)?;
            continue;
        };
        let value = match (field.kind, wire) {
            (Kind::Str, 2) => json!(String::from_utf8_lossy(rd.bytes()?)),
            (Kind::Bytes, 2) => {
                json!(base64::engine::general_purpose::STANDARD.encode(rd.bytes()?))
            }
            (Kind::Int, 0) => json!(rd.varint()? as i64),
            (Kind::Bool, 0) => json!(rd.varint()? != 0),
            (Kind::Msg(sub), 2) => Value::Object(decode_message(rd.bytes()?, sub)?),
            (k @ (Kind::MapStr | Kind::MapBytes), 2) => {
                let (key, v) = decode_map_entry(rd.bytes()?, k)?;
                let slot = out
                    .entry(field.name)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(m) = slot.as_object_mut() {
                    m.insert(key, v);
                }
                continue;
            }
            (_, wire) => {
                rd.skip(wire)?;
                continue;
            }
        };
        if field.repeated {
            let slot = out.entry(field.name).or_insert_with(|| json!([]));
            if let Some(a) = slot.as_array_mut() {
                a.push(value);
            }
        } else {
            out.insert(field.name.to_string(), value);
        }
    }
    Ok(out)
}

/// Decodes a Kubernetes protobuf body into its JSON form.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let inner = body
        .strip_prefix(MAGIC)
        .ok_or("missing protobuf magic prefix")?;
    let envelope = decode_message(inner, UNKNOWN)?;
    let api_version = envelope
        .get("typeMeta")
        .and_then(|t| t.get("apiVersion"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let kind = envelope
        .get("typeMeta")
        .and_then(|t| t.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let table = table_for(&kind)
        .ok_or_else(|| format!("protobuf bodies of kind {kind:?} are not supported; send JSON"))?;
    let raw = envelope
        .get("raw")
        .and_then(Value::as_str)
        .map(|b| base64::engine::general_purpose::STANDARD.decode(b))
        .transpose()
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    let mut obj = decode_message(&raw, table)?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![((num << 3) | 2) as u8, payload.len() as u8];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn a_configmap_envelope_decodes_to_json() {
        let meta = [
            field(1, b"cm1"),
            field(11, &[field(1, b"app"), field(2, b"web")].concat()),
        ]
        .concat();
        let entry = [field(1, b"k"), field(2, b"v")].concat();
        let raw = [field(1, &meta), field(2, &entry)].concat();
        let type_meta = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &raw)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1", "labels": {"app": "web"}}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode(b"nope").is_err());
        assert!(decode(b"k8s\0\x0a\xff").is_err());
        let unsupported = [
            MAGIC.to_vec(),
            field(1, &[field(1, b"v1"), field(2, b"Pod")].concat()),
        ]
        .concat();
        assert!(decode(&unsupported).is_err());
    }
}
