//! A tunnel's identity and the token a connector runs with.
//!
//! The token has cloudflared's shape (`cloudflared tunnel run --token`): base64 of a JSON
//! object with the account tag `a`, the tunnel id `t` and the base64 tunnel secret `s`; meshlb
//! adds the PoPs to dial `p` (tunnel addresses) and the SPKI pin of their certificates `k`, so
//! the connector needs nothing else.

use std::fmt;
use std::str::FromStr;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The longest token accepted: a token names a handful of PoPs, never kilobytes.
pub const MAX_TOKEN_BYTES: usize = 4096;

/// A tunnel's id: a UUID, as Cloudflare's `cfd_tunnel` ids are.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TunnelId(pub [u8; 16]);

impl fmt::Display for TunnelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// As its text (a UUID with dashes), as the admin API shows it.
impl Serialize for TunnelId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Debug for TunnelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TunnelId({self})")
    }
}

/// Why a tunnel id did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a tunnel id (a UUID: 32 hex digits, dashes optional)")]
pub struct BadTunnelId(pub String);

impl FromStr for TunnelId {
    type Err = BadTunnelId;

    fn from_str(s: &str) -> Result<TunnelId, BadTunnelId> {
        let bad = || BadTunnelId(s.chars().take(64).collect());
        let hex: Vec<u8> = s.bytes().filter(|&b| b != b'-').collect();
        if hex.len() != 32 || s.len() > 36 {
            return Err(bad());
        }
        let mut id = [0u8; 16];
        for (i, pair) in hex.chunks(2).enumerate() {
            let text = std::str::from_utf8(pair).map_err(|_| bad())?;
            id[i] = u8::from_str_radix(text, 16).map_err(|_| bad())?;
        }
        Ok(TunnelId(id))
    }
}

/// A tunnel's secret: 32 random bytes. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct TunnelSecret(pub [u8; 32]);

impl fmt::Debug for TunnelSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TunnelSecret(..)")
    }
}

impl TunnelSecret {
    /// A fresh random secret.
    pub fn random() -> TunnelSecret {
        TunnelSecret(rand::random())
    }

    pub fn to_base64(&self) -> String {
        STANDARD.encode(self.0)
    }

    pub fn from_base64(text: &str) -> Option<TunnelSecret> {
        let bytes = STANDARD.decode(text.trim()).ok()?;
        Some(TunnelSecret(bytes.try_into().ok()?))
    }
}

/// What a connector runs with.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    pub account: String,
    pub tunnel: TunnelId,
    pub secret: TunnelSecret,
    /// The PoPs' tunnel addresses (`host:port`), nearest first as the operator lists them.
    pub pops: Vec<String>,
    /// The SPKI pin of the PoPs' certificates (`sha256//…`, as curl's `--pinnedpubkey`).
    pub pin: Option<String>,
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Token")
            .field("account", &self.account)
            .field("tunnel", &self.tunnel)
            .field("pops", &self.pops)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize, Deserialize)]
struct Wire {
    a: String,
    t: String,
    s: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    p: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    k: Option<String>,
}

/// Why a token did not read. None of them quotes the token, which holds the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    #[error("the token is longer than {MAX_TOKEN_BYTES} bytes")]
    TooLong,
    #[error("the token is not base64")]
    NotBase64,
    #[error("the token is not a JSON object with `a`, `t` and `s`: {0}")]
    NotJson(String),
    #[error("the token's tunnel id: {0}")]
    TunnelId(#[from] BadTunnelId),
    #[error("the token's secret is not 32 bytes of base64")]
    Secret,
}

impl Token {
    /// The token's text, as `GET …/cfd_tunnel/{id}/token` answers it.
    pub fn encode(&self) -> String {
        let wire = Wire {
            a: self.account.clone(),
            t: self.tunnel.to_string(),
            s: self.secret.to_base64(),
            p: self.pops.clone(),
            k: self.pin.clone(),
        };
        let json = serde_json::to_vec(&wire).unwrap_or_default();
        STANDARD.encode(json)
    }

    pub fn decode(text: &str) -> Result<Token, TokenError> {
        let text = text.trim();
        if text.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::TooLong);
        }
        let json = STANDARD.decode(text).map_err(|_| TokenError::NotBase64)?;
        let wire: Wire = serde_json::from_slice(&json).map_err(|e| {
            // serde's message names the field, never the value.
            TokenError::NotJson(e.classify_name())
        })?;
        Ok(Token {
            account: wire.a,
            tunnel: wire.t.parse()?,
            secret: TunnelSecret::from_base64(&wire.s).ok_or(TokenError::Secret)?,
            pops: wire.p,
            pin: wire.k,
        })
    }
}

trait ClassifyName {
    fn classify_name(&self) -> String;
}

impl ClassifyName for serde_json::Error {
    fn classify_name(&self) -> String {
        match self.classify() {
            serde_json::error::Category::Io => "unreadable".into(),
            serde_json::error::Category::Syntax => "not JSON".into(),
            serde_json::error::Category::Data => "a field is missing or of the wrong type".into(),
            serde_json::error::Category::Eof => "cut short".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> Token {
        Token {
            account: "699d98642c564d2e855e9661899b7252".into(),
            tunnel: "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415".parse().expect("id"),
            secret: TunnelSecret([7; 32]),
            pops: vec!["127.0.0.1:7844".into()],
            pin: Some("sha256//abc".into()),
        }
    }

    #[test]
    fn a_token_reads_back_as_written() {
        assert_eq!(Token::decode(&token().encode()), Ok(token()));
    }

    #[test]
    fn a_cloudflared_shaped_token_without_meshlb_fields_reads() {
        let json = r#"{"a":"acct","t":"f70ff985a4ef4643bbbc4a0ed4fc8415","s":"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="}"#;
        let t = Token::decode(&STANDARD.encode(json)).expect("reads");
        assert_eq!(t.tunnel.to_string(), "f70ff985-a4ef-4643-bbbc-4a0ed4fc8415");
        assert!(t.pops.is_empty());
    }

    #[test]
    fn neither_debug_nor_an_error_shows_the_secret() {
        let t = token();
        let shown = format!("{t:?} {:?}", t.secret);
        assert!(!shown.contains(&t.secret.to_base64()), "{shown}");
        let wrong =
            STANDARD.encode(r#"{"a":"x","t":"f70ff985a4ef4643bbbc4a0ed4fc8415","s":"c2VjcmV0"}"#);
        let e = Token::decode(&wrong).expect_err("short secret");
        assert!(!e.to_string().contains("c2VjcmV0"), "{e}");
    }

    #[test]
    fn malformed_tokens_are_refused_with_why() {
        assert_eq!(Token::decode("***"), Err(TokenError::NotBase64));
        assert_eq!(
            Token::decode(&"A".repeat(MAX_TOKEN_BYTES + 1)),
            Err(TokenError::TooLong)
        );
        assert!(matches!(
            Token::decode(&STANDARD.encode("[1]")),
            Err(TokenError::NotJson(_))
        ));
        assert!("f70ff985".parse::<TunnelId>().is_err());
        assert!("zz0ff985-a4ef-4643-bbbc-4a0ed4fc8415"
            .parse::<TunnelId>()
            .is_err());
    }
}
