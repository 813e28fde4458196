//! Bodies between the API's JSON and the config file's TOML. JSON's `null` has no TOML
//! counterpart: in an object it means "not set" (the field takes its default), as Cloudflare's
//! API treats it; in an array it is refused. The read-only fields Cloudflare returns (`id`,
//! `created_on`, `modified_on`) are dropped from bodies, so that a resource read can be
//! written back unchanged.

use serde_json::{Map, Number, Value as Json};
use toml::{Table, Value as Toml};

use meshlb_node::control::writes::FieldError;

/// Fields of Cloudflare's answers that a body may carry back and that are not config.
pub const READ_ONLY: [&str; 3] = ["id", "created_on", "modified_on"];

/// Cloudflare's `resource_type` of a kind.
pub(crate) fn resource_type(kind: lb_core::config::document::Kind) -> &'static str {
    use lb_core::config::document::Kind;
    match kind {
        Kind::Monitor => "monitor",
        Kind::MonitorGroup => "monitor_group",
        Kind::Pool => "pool",
        Kind::LoadBalancer => "load_balancer",
    }
}

/// A reference in Cloudflare's shape (ids are names: `resource_name` is the id).
pub(crate) fn reference(r: &lb_core::config::references::Reference) -> Json {
    serde_json::json!({
        "reference_type": r.direction.name(),
        "resource_id": r.id,
        "resource_name": r.id,
        "resource_type": resource_type(r.kind),
    })
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn number(n: &Number, path: &str) -> Result<Toml, FieldError> {
    if let Some(i) = n.as_i64() {
        Ok(Toml::Integer(i))
    } else if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
        Ok(Toml::Float(f))
    } else {
        Err(FieldError {
            path: path.to_string(),
            reason: format!("{n} is out of range"),
        })
    }
}

fn value(v: &Json, path: &str) -> Result<Option<Toml>, FieldError> {
    Ok(Some(match v {
        Json::Null => return Ok(None),
        Json::Bool(b) => Toml::Boolean(*b),
        Json::Number(n) => number(n, path)?,
        Json::String(s) => Toml::String(s.clone()),
        Json::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let at = format!("{path}[{i}]");
                match value(item, &at)? {
                    Some(v) => out.push(v),
                    None => {
                        return Err(FieldError {
                            path: at,
                            reason: "null in a list".into(),
                        })
                    }
                }
            }
            Toml::Array(out)
        }
        Json::Object(map) => Toml::Table(table(map, path)?),
    }))
}

fn table(map: &Map<String, Json>, path: &str) -> Result<Table, FieldError> {
    let mut out = Table::new();
    for (k, v) in map {
        if let Some(v) = value(v, &join(path, k))? {
            out.insert(k.clone(), v);
        }
    }
    Ok(out)
}

/// A resource's body as a config table; every error with its field path.
pub fn body(json: &Json) -> Result<Table, Vec<FieldError>> {
    let Json::Object(map) = json else {
        return Err(vec![FieldError {
            path: String::new(),
            reason: "the body must be a JSON object".into(),
        }]);
    };
    let mut map = map.clone();
    for k in READ_ONLY {
        map.remove(k);
    }
    table(&map, "").map_err(|e| vec![e])
}

/// A config value as JSON (TOML's dates, which meshlb's config has none of, as strings).
pub fn to_json(v: &Toml) -> Json {
    match v {
        Toml::String(s) => Json::String(s.clone()),
        Toml::Integer(i) => Json::from(*i),
        Toml::Float(f) => Number::from_f64(*f).map_or(Json::Null, Json::Number),
        Toml::Boolean(b) => Json::Bool(*b),
        Toml::Datetime(d) => Json::String(d.to_string()),
        Toml::Array(items) => Json::Array(items.iter().map(to_json).collect()),
        Toml::Table(t) => Json::Object(t.iter().map(|(k, v)| (k.clone(), to_json(v))).collect()),
    }
}

/// A resource as the API shows it: its fields, and its `id` (its name).
pub fn resource(t: &Table) -> Json {
    let mut json = to_json(&Toml::Table(t.clone()));
    if let (Json::Object(map), Some(name)) = (&mut json, t.get("name").and_then(Toml::as_str)) {
        map.insert("id".into(), Json::String(name.to_string()));
    }
    json
}

/// Cloudflare's PATCH: the fields given replace the resource's, whole; a `null` removes one.
pub fn patch(current: &Table, changes: &Json) -> Result<Table, Vec<FieldError>> {
    let Json::Object(map) = changes else {
        return Err(vec![FieldError {
            path: String::new(),
            reason: "the body must be a JSON object".into(),
        }]);
    };
    let mut next = current.clone();
    for (k, v) in map {
        if READ_ONLY.contains(&k.as_str()) {
            continue;
        }
        match value(v, k).map_err(|e| vec![e])? {
            Some(v) => {
                next.insert(k.clone(), v);
            }
            None => {
                next.remove(k);
            }
        }
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn nulls_are_unset_and_read_only_fields_dropped() {
        let t = body(&json!({
            "id": "x", "created_on": "2024", "name": "p", "fallback_pool": null,
            "weight": 0.5, "port": 0, "origins": [{ "name": "a", "header": { "Host": ["h"] } }]
        }))
        .expect("body");
        assert_eq!(t.get("id"), None);
        assert_eq!(t.get("fallback_pool"), None);
        assert_eq!(t.get("weight"), Some(&Toml::Float(0.5)));
        assert_eq!(t.get("port"), Some(&Toml::Integer(0)));
        assert_eq!(resource(&t)["id"], json!("p"));
        assert_eq!(resource(&t)["origins"][0]["header"]["Host"][0], json!("h"));
    }

    #[test]
    fn refusals_name_the_field() {
        let e = body(&json!({ "origins": [1, null] })).expect_err("null in a list");
        assert_eq!(e[0].path, "origins[1]");
        let e = body(&json!({ "port": u64::MAX })).expect_err("too big");
        assert_eq!(e[0].path, "port");
        assert!(body(&json!([1])).is_err());
    }

    #[test]
    fn patch_replaces_fields_whole_and_null_removes() {
        let current =
            body(&json!({ "name": "p", "load_shedding": { "default_percent": 5 }, "latitude": 1 }))
                .expect("body");
        let next = patch(
            &current,
            &json!({ "load_shedding": { "session_percent": 2 }, "latitude": null, "id": "p" }),
        )
        .expect("patch");
        assert_eq!(
            resource(&next)["load_shedding"],
            json!({ "session_percent": 2 })
        );
        assert_eq!(next.get("latitude"), None);
        assert_eq!(next.get("name"), Some(&Toml::String("p".into())));
    }
}
