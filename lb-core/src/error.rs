//! Errors in configuration files: each names the file, the field path and the reason, and a
//! load reports all of them at once so an operator fixes a file in one pass.

use std::fmt;

/// One problem in one field of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file as the operator named it.
    pub file: String,
    /// The field path, `pools[2].origins[0].weight`; empty for the whole file.
    pub path: String,
    /// What is wrong and, where it helps, what would be right.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}: {}", self.file, self.reason)
        } else {
            write!(f, "{}: {}: {}", self.file, self.path, self.reason)
        }
    }
}

/// Every problem found in a file; never empty when returned as an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

/// Collects errors while validating one file.
#[derive(Debug)]
pub(crate) struct ErrorSink {
    file: String,
    errors: Vec<ConfigError>,
}

impl ErrorSink {
    pub(crate) fn new(file: &str) -> Self {
        ErrorSink {
            file: file.to_string(),
            errors: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, path: impl Into<String>, reason: impl Into<String>) {
        self.errors.push(ConfigError {
            file: self.file.clone(),
            path: path.into(),
            reason: reason.into(),
        });
    }

    pub(crate) fn len(&self) -> usize {
        self.errors.len()
    }

    /// `Ok(value)` when nothing was reported, else every error.
    pub(crate) fn finish<T>(self, value: T) -> Result<T, ConfigErrors> {
        if self.errors.is_empty() {
            Ok(value)
        } else {
            Err(ConfigErrors(self.errors))
        }
    }
}

/// Turns a TOML syntax or type error into a [`ConfigError`] that names the line and column.
pub(crate) fn toml_error(file: &str, text: &str, err: &toml::de::Error) -> ConfigError {
    let location = err.span().map(|span| {
        let before = &text[..span.start.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        format!("line {line}, column {column}")
    });
    ConfigError {
        file: file.to_string(),
        path: location.unwrap_or_default(),
        reason: err.message().trim().to_string(),
    }
}

/// Turns serde_ignored's path of an unknown key into our `a[1].b` notation.
pub(crate) fn ignored_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", ignored_path(parent)),
        Path::Map { parent, key } => {
            let p = ignored_path(parent);
            if p.is_empty() {
                key.clone()
            } else {
                format!("{p}.{key}")
            }
        }
        Path::Some { parent }
        | Path::NewtypeStruct { parent }
        | Path::NewtypeVariant { parent } => ignored_path(parent),
    }
}

/// Parses TOML into `T`. Unknown keys are not ignored (a misspelt `consecutive_donw` must not
/// silently fall back to a default): they are returned as errors in the sink, so that the
/// caller's validation adds its own and the operator sees every problem at once. A syntax or
/// type error stops parsing and is returned alone.
pub(crate) fn parse_toml_strict<T: serde::de::DeserializeOwned>(
    file: &str,
    text: &str,
) -> Result<(T, ErrorSink), ConfigErrors> {
    let de = toml::Deserializer::parse(text)
        .map_err(|e| ConfigErrors(vec![toml_error(file, text, &e)]))?;
    let mut unknown = Vec::new();
    let mut track = serde_path_to_error::Track::new();
    let tracked = serde_path_to_error::Deserializer::new(de, &mut track);
    let value: Result<T, _> =
        serde_ignored::deserialize(tracked, |path| unknown.push(ignored_path(&path)));
    let value = value.map_err(|e| {
        // A type error names the field it is in, as validation's errors do; the line and
        // column follow the reason.
        let mut error = toml_error(file, text, &e);
        let field = track.path().to_string();
        if !field.is_empty() && field != "?" {
            if !error.path.is_empty() {
                error.reason = format!("{} ({})", error.reason, error.path);
            }
            error.path = field;
        }
        ConfigErrors(vec![error])
    })?;
    let mut sink = ErrorSink::new(file);
    for path in unknown {
        sink.push(path, "unknown field");
    }
    Ok((value, sink))
}
