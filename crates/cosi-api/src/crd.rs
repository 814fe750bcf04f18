//! CustomResourceDefinitions generated from the types, and their YAML form as
//! checked in under `deploy/crds/`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use crate::{Bucket, BucketAccess, BucketAccessClass, BucketClaim, BucketClass};

/// The annotation kube-apiserver requires on a CRD of a group under `k8s.io`.
pub const API_APPROVED_ANNOTATION: &str = "api-approved.kubernetes.io";

/// Its value on the COSI CRDs: `objectstorage.k8s.io` is the Kubernetes
/// community's group, and this schema has not passed an upstream API review,
/// so it says so the way kube-apiserver accepts (a reason starting with
/// `unapproved`), as upstream COSI's own CRDs do.
pub const API_APPROVAL: &str =
    "unapproved, cosi-rs implementation of KEP-1979 v1alpha2, not an API-reviewed upstream schema";

/// Every COSI CRD with the file name it is checked in under, in install order.
pub fn all() -> Vec<(&'static str, CustomResourceDefinition)> {
    let mut crds = vec![
        ("bucketclasses.yaml", BucketClass::crd()),
        ("bucketaccessclasses.yaml", BucketAccessClass::crd()),
        ("buckets.yaml", Bucket::crd()),
        ("bucketclaims.yaml", BucketClaim::crd()),
        ("bucketaccesses.yaml", BucketAccess::crd()),
    ];
    for (_, crd) in &mut crds {
        crd.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(API_APPROVED_ANNOTATION.to_owned(), API_APPROVAL.to_owned());
        for version in &mut crd.spec.versions {
            if let Some(schema) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                name_enum_values(schema);
            }
        }
    }
    crds
}

/// Ends the description of every field that holds one of a set of values,
/// or a list of them, with `Possible values: A, B, C.`, as upstream's CRDs
/// do: `kubectl explain` lists a field's `enum` but not the `enum` of a
/// list's items, and the schema's `enum` stays the one source of the values.
pub fn name_enum_values(schema: &mut JSONSchemaProps) {
    for prop in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        let values = prop.enum_.as_ref().or(match &prop.items {
            Some(JSONSchemaPropsOrArray::Schema(items)) => items.enum_.as_ref(),
            _ => None,
        });
        if let Some(values) = values {
            let names: Vec<String> = values
                .iter()
                .map(|v| match &v.0 {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            let sentence = format!("Possible values: {}.", names.join(", "));
            let description = prop.description.get_or_insert_with(String::new);
            if !description.ends_with(&sentence) {
                if !description.is_empty() {
                    description.push('\n');
                }
                description.push_str(&sentence);
            }
        }
        name_enum_values(prop);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &mut schema.items {
        name_enum_values(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &mut schema.additional_properties {
        name_enum_values(values);
    }
}

/// `crd` as JSON, its whole-number bounds (`minimum: 1`, held as `f64` by
/// the schema type) written as integers, as kubectl and helm both read
/// them back.
fn rendered(crd: &CustomResourceDefinition) -> serde_json::Value {
    fn integral(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Number(n) => {
                if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && n.is_f64())
                    && f.abs() < 9.0e15
                {
                    *v = serde_json::Value::from(f as i64);
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(integral),
            serde_json::Value::Object(fields) => fields.values_mut().for_each(integral),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(crd).unwrap_or_default();
    integral(&mut value);
    value
}

/// Renders a CRD as the YAML document checked in under `deploy/crds/`.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::ser::Error> {
    let body = serde_saphyr::to_string(&rendered(crd))?;
    Ok(format!(
        "# Generated from the types in crates/cosi-api; do not edit.\n# Regenerate with: UPDATE_CRDS=1 cargo test -p cosi-api --test crds\n{body}"
    ))
}

/// All CRDs as one multi-document YAML stream, ready for `kubectl apply -f -`.
pub fn all_yaml() -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for (_, crd) in all() {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&rendered(&crd))?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON;

    fn schema(v: serde_json::Value) -> JSONSchemaProps {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn enum_fields_and_lists_of_them_name_their_values_once() {
        let mut s = schema(serde_json::json!({
            "type": "object",
            "properties": {
                "policy": {"type": "string", "description": "What happens.", "enum": ["Retain", "Delete"]},
                "protocols": {"type": "array", "items": {"type": "string", "enum": ["S3", "GCS"]}},
                "nested": {"type": "object", "properties": {
                    "mode": {"type": "string", "enum": ["ReadOnly"]}
                }},
                "plain": {"type": "string", "description": "Free text."}
            }
        }));
        name_enum_values(&mut s);
        name_enum_values(&mut s);
        let props = s.properties.as_ref().unwrap();
        let desc = |p: &JSONSchemaProps| p.description.clone().unwrap_or_default();
        assert_eq!(
            desc(&props["policy"]),
            "What happens.\nPossible values: Retain, Delete."
        );
        assert_eq!(desc(&props["protocols"]), "Possible values: S3, GCS.");
        assert_eq!(
            desc(&props["nested"].properties.as_ref().unwrap()["mode"]),
            "Possible values: ReadOnly."
        );
        assert_eq!(desc(&props["plain"]), "Free text.");
        assert_eq!(
            props["policy"].enum_,
            Some(vec![JSON("Retain".into()), JSON("Delete".into())]),
            "the enum stays"
        );
    }
}
