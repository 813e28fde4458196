//! The config file as a document of resources, for the control plane (docs/api.md): the
//! monitors, monitor groups, pools and load balancers of `meshlb.toml` listed, read, created,
//! replaced and deleted by id. A resource's id is its `name` — what every other part of the
//! file already refers to it by — so ids survive reloads and references need no translation.
//!
//! The document only moves tables; what they mean is checked by [`super::Config::parse`] on
//! the text [`Document::to_text`] gives, exactly as `meshlb check` checks a file.

use toml::{Table, Value};

/// A kind of resource of the control plane, and the top-level array of the file holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Monitor,
    MonitorGroup,
    Pool,
    LoadBalancer,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::Monitor,
        Kind::MonitorGroup,
        Kind::Pool,
        Kind::LoadBalancer,
    ];

    /// The file's array of this kind (`[[pools]]`).
    pub fn key(self) -> &'static str {
        match self {
            Kind::Monitor => "monitors",
            Kind::MonitorGroup => "monitor_groups",
            Kind::Pool => "pools",
            Kind::LoadBalancer => "load_balancers",
        }
    }

    /// One resource of the kind, for messages.
    pub fn singular(self) -> &'static str {
        match self {
            Kind::Monitor => "monitor",
            Kind::MonitorGroup => "monitor group",
            Kind::Pool => "pool",
            Kind::LoadBalancer => "load balancer",
        }
    }

    /// Whether two ids name the same resource: load balancers are hostnames, matched as
    /// `Config::load_balancer` matches them (case-insensitively, a trailing dot ignored).
    pub fn same_id(self, a: &str, b: &str) -> bool {
        match self {
            Kind::LoadBalancer => a
                .trim_end_matches('.')
                .eq_ignore_ascii_case(b.trim_end_matches('.')),
            _ => a == b,
        }
    }
}

/// Why an edit of the document cannot be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("the document is not TOML: {0}")]
    Syntax(String),
    #[error("`{key}` must be an array of tables")]
    NotAnArray { key: &'static str },
    #[error("no {} with id {id:?}", kind.singular())]
    NotFound { kind: Kind, id: String },
    #[error("a {} with id {id:?} exists already", kind.singular())]
    Exists { kind: Kind, id: String },
    #[error("name: {name:?} differs from the id {id:?} (the id is the name; a rename is a delete and a create)")]
    Renamed { id: String, name: String },
    #[error("name: must be a string")]
    NameNotAString,
}

/// A config file's tables, edited by resource.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Document {
    table: Table,
}

impl Document {
    /// The document of a config file's text (TOML syntax only; meaning is not checked here).
    pub fn parse(text: &str) -> Result<Document, DocumentError> {
        let table: Table =
            toml::from_str(text).map_err(|e| DocumentError::Syntax(e.to_string()))?;
        for kind in Kind::ALL {
            match table.get(kind.key()) {
                None => {}
                Some(Value::Array(items)) if items.iter().all(Value::is_table) => {}
                Some(_) => return Err(DocumentError::NotAnArray { key: kind.key() }),
            }
        }
        Ok(Document { table })
    }

    /// The document as a config file's text.
    pub fn to_text(&self) -> String {
        // A table of strings, numbers, booleans, arrays and tables always serializes.
        toml::to_string(&self.table).unwrap_or_default()
    }

    /// Every resource of `kind`, in the file's order.
    pub fn list(&self, kind: Kind) -> Vec<&Table> {
        match self.table.get(kind.key()) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_table).collect(),
            _ => Vec::new(),
        }
    }

    /// The tables of a top-level array that is not a resource kind (`zones`).
    pub fn list_top(&self, key: &str) -> Vec<&Table> {
        match self.table.get(key) {
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_table).collect(),
            _ => Vec::new(),
        }
    }

    /// A top-level array that is not a resource kind (`tunnels`, `routes`), to edit: made
    /// when missing. Its tables are found by the caller (their ids are fields, not names).
    pub fn top_mut(&mut self, key: &str) -> &mut Vec<Value> {
        let entry = self
            .table
            .entry(key)
            .or_insert_with(|| Value::Array(Vec::new()));
        if !entry.is_array() {
            // Never a valid config (validation refuses it), so never the document in force.
            *entry = Value::Array(Vec::new());
        }
        match entry {
            Value::Array(items) => items,
            _ => unreachable!("made an array above"),
        }
    }

    /// The position of resource `id` of `kind` in its array.
    pub fn position(&self, kind: Kind, id: &str) -> Option<usize> {
        self.list(kind)
            .iter()
            .position(|t| name_of(t).is_some_and(|n| kind.same_id(n, id)))
    }

    /// Resource `id` of `kind`.
    pub fn get(&self, kind: Kind, id: &str) -> Option<&Table> {
        self.position(kind, id).map(|i| self.list(kind)[i])
    }

    fn items(&mut self, kind: Kind) -> &mut Vec<Value> {
        let entry = self
            .table
            .entry(kind.key())
            .or_insert_with(|| Value::Array(Vec::new()));
        if !entry.is_array() {
            *entry = Value::Array(Vec::new());
        }
        match entry {
            Value::Array(items) => items,
            _ => unreachable!("made an array above"),
        }
    }

    /// Adds `body` as a new resource of `kind`: its `name` is its id, or `fresh_id` when it has
    /// none (Cloudflare's monitors have no name). Returns the id.
    pub fn create(
        &mut self,
        kind: Kind,
        mut body: Table,
        fresh_id: &str,
    ) -> Result<String, DocumentError> {
        let id = match body.get("name") {
            None => fresh_id.to_string(),
            Some(Value::String(name)) => name.clone(),
            Some(_) => return Err(DocumentError::NameNotAString),
        };
        if self.position(kind, &id).is_some() {
            return Err(DocumentError::Exists { kind, id });
        }
        body.insert("name".into(), Value::String(id.clone()));
        self.items(kind).push(Value::Table(body));
        Ok(id)
    }

    /// Sets `field` to `value` in every resource of `kind` (`None` removes it).
    pub fn set_in_every(&mut self, kind: Kind, field: &str, value: Option<Value>) {
        let Some(Value::Array(items)) = self.table.get_mut(kind.key()) else {
            return;
        };
        for item in items.iter_mut() {
            if let Value::Table(t) = item {
                match &value {
                    Some(v) => {
                        t.insert(field.to_string(), v.clone());
                    }
                    None => {
                        t.remove(field);
                    }
                }
            }
        }
    }

    /// Replaces resource `id` of `kind` by `body`, in its place: a `name` in the body must be
    /// the id.
    pub fn replace(&mut self, kind: Kind, id: &str, mut body: Table) -> Result<(), DocumentError> {
        let at = self
            .position(kind, id)
            .ok_or_else(|| DocumentError::NotFound {
                kind,
                id: id.to_string(),
            })?;
        let stored = name_of(self.list(kind)[at]).unwrap_or(id).to_string();
        match body.get("name") {
            None => {}
            Some(Value::String(name)) if kind.same_id(name, &stored) => {}
            Some(Value::String(name)) => {
                return Err(DocumentError::Renamed {
                    id: stored,
                    name: name.clone(),
                })
            }
            Some(_) => return Err(DocumentError::NameNotAString),
        }
        body.insert("name".into(), Value::String(stored));
        self.items(kind)[at] = Value::Table(body);
        Ok(())
    }

    /// Removes resource `id` of `kind`.
    pub fn delete(&mut self, kind: Kind, id: &str) -> Result<(), DocumentError> {
        let at = self
            .position(kind, id)
            .ok_or_else(|| DocumentError::NotFound {
                kind,
                id: id.to_string(),
            })?;
        self.items(kind).remove(at);
        Ok(())
    }
}

fn name_of(t: &Table) -> Option<&str> {
    t.get("name").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[monitors]]
name = "web"
type = "http"

[[pools]]
name = "eu"
monitor = "web"
origins = [{ name = "a", address = "192.0.2.1" }]

[[load_balancers]]
name = "www.example.com"
default_pools = ["eu"]
"#;

    fn table(text: &str) -> Table {
        toml::from_str(text).expect("table")
    }

    #[test]
    fn lists_and_gets_by_name() {
        let doc = Document::parse(FILE).expect("parse");
        assert_eq!(doc.list(Kind::Pool).len(), 1);
        assert!(doc.list(Kind::MonitorGroup).is_empty());
        assert!(doc.get(Kind::Pool, "eu").is_some());
        assert!(doc.get(Kind::Pool, "EU").is_none(), "pool ids are exact");
        assert!(
            doc.get(Kind::LoadBalancer, "WWW.example.com.").is_some(),
            "hostnames match as DNS does"
        );
    }

    #[test]
    fn create_takes_the_name_or_the_fresh_id() {
        let mut doc = Document::parse(FILE).expect("parse");
        let id = doc
            .create(Kind::Monitor, table("type = \"tcp\""), "0123abcd")
            .expect("create");
        assert_eq!(id, "0123abcd");
        assert_eq!(
            doc.get(Kind::Monitor, "0123abcd")
                .and_then(|t| t.get("name")),
            Some(&Value::String("0123abcd".into()))
        );
        let named = doc
            .create(Kind::Pool, table("name = \"us\"\norigins = []"), "x")
            .expect("create");
        assert_eq!(named, "us");
        assert_eq!(
            doc.create(Kind::Pool, table("name = \"us\""), "x"),
            Err(DocumentError::Exists {
                kind: Kind::Pool,
                id: "us".into()
            })
        );
        assert_eq!(
            doc.create(Kind::Pool, table("name = 3"), "x"),
            Err(DocumentError::NameNotAString)
        );
    }

    #[test]
    fn replace_keeps_the_place_and_the_name() {
        let mut doc = Document::parse(FILE).expect("parse");
        doc.create(Kind::Pool, table("name = \"us\""), "x")
            .expect("second pool");
        doc.replace(Kind::Pool, "eu", table("origins = []"))
            .expect("replace");
        let pools = doc.list(Kind::Pool);
        assert_eq!(pools[0].get("name"), Some(&Value::String("eu".into())));
        assert!(pools[0].get("monitor").is_none(), "a replace is whole");
        assert!(matches!(
            doc.replace(Kind::Pool, "eu", table("name = \"other\"")),
            Err(DocumentError::Renamed { .. })
        ));
        assert!(matches!(
            doc.replace(Kind::Pool, "nope", Table::new()),
            Err(DocumentError::NotFound { .. })
        ));
        doc.replace(
            Kind::LoadBalancer,
            "www.EXAMPLE.com",
            table("name = \"www.example.com.\"\ndefault_pools = [\"us\"]"),
        )
        .expect("same hostname");
        assert_eq!(
            doc.list(Kind::LoadBalancer)[0].get("name"),
            Some(&Value::String("www.example.com".into())),
            "the stored spelling stays"
        );
    }

    #[test]
    fn delete_and_round_trip() {
        let mut doc = Document::parse(FILE).expect("parse");
        doc.delete(Kind::Monitor, "web").expect("delete");
        assert!(doc.list(Kind::Monitor).is_empty());
        assert!(doc.delete(Kind::Monitor, "web").is_err());
        let again = Document::parse(&doc.to_text()).expect("reparse");
        assert_eq!(again, doc);
    }

    #[test]
    fn refuses_what_is_not_a_config_shape() {
        assert!(matches!(
            Document::parse("pools = 3"),
            Err(DocumentError::NotAnArray { key: "pools" })
        ));
        assert!(matches!(
            Document::parse("[[pools]"),
            Err(DocumentError::Syntax(_))
        ));
        assert_eq!(
            Document::parse("").expect("empty").list(Kind::Pool).len(),
            0
        );
    }
}
