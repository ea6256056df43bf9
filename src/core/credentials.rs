//! Tenant tokens: their format, how one is minted from injected random
//! bytes, the hash that is all the ledger keeps of it, the constant-time
//! comparison, and the scopes a token grants.

use super::ids::sha256_hex;
use subtle::ConstantTimeEq;

/// What a token may do: `ingest` (documents and jobs) and `search`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    Ingest,
    Search,
}

impl Scope {
    pub const ALL: [Scope; 2] = [Scope::Ingest, Scope::Search];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Search => "search",
        }
    }

    pub fn parse(raw: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.as_str() == raw)
    }
}

/// A token's scopes: a set, in `Scope` order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Scopes(Vec<Scope>);

impl Scopes {
    pub fn all() -> Scopes {
        Scopes(Scope::ALL.to_vec())
    }

    /// The scopes named (each at most once); `None` if a name is unknown
    /// or repeated.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<Scopes> {
        let mut out = Vec::new();
        for n in names {
            let s = Scope::parse(n)?;
            if out.contains(&s) {
                return None;
            }
            out.push(s);
        }
        out.sort();
        Some(Scopes(out))
    }

    /// Read back from the ledger's JSON array (unknown names are dropped:
    /// a token never gains a scope by a bad row).
    pub fn from_json(json: &str) -> Scopes {
        let names: Vec<String> = serde_json::from_str(json).unwrap_or_default();
        let mut out: Vec<Scope> = names.iter().filter_map(|n| Scope::parse(n)).collect();
        out.sort();
        out.dedup();
        Scopes(out)
    }

    pub fn to_json(&self) -> String {
        serde_json::Value::from(self.names()).to_string()
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|s| s.as_str()).collect()
    }

    pub fn has(&self, scope: Scope) -> bool {
        self.0.contains(&scope)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Every token starts with this (secret scanners can recognize one).
pub const TOKEN_PREFIX: &str = "tkn_";

/// A freshly minted token: its ID (public, in listings and URLs) and the
/// token itself, `tkn_<id>_<secret>`, shown once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MintedToken {
    pub token_id: String,
    pub token: String,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A token from 32 random bytes: 8 make its ID (16 hex), 24 its secret
/// (48 hex, 192 bits).
pub fn mint(entropy: &[u8; 32]) -> MintedToken {
    let (id, secret) = entropy.split_at(8);
    let token_id = hex(id);
    let token = format!("{TOKEN_PREFIX}{token_id}_{}", hex(secret));
    MintedToken { token_id, token }
}

/// The ID inside a token of the minted shape; `None` for anything else.
pub fn token_id_of(token: &str) -> Option<&str> {
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    let (id, secret) = rest.split_once('_')?;
    let is_hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    (is_hex(id, 16) && is_hex(secret, 48)).then_some(id)
}

/// What the ledger keeps of a token: its SHA-256, hex.
pub fn token_hash(token: &str) -> String {
    sha256_hex(token.as_bytes())
}

/// Whether `token` hashes to `stored`, compared in constant time.
pub fn token_matches(token: &str, stored: &str) -> bool {
    token_hash(token).as_bytes().ct_eq(stored.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_parse_back_and_match_only_their_hash() {
        let t = mint(&[7; 32]);
        assert_eq!(t.token_id, "0707070707070707");
        assert_eq!(token_id_of(&t.token), Some(t.token_id.as_str()));
        let h = token_hash(&t.token);
        assert!(token_matches(&t.token, &h));
        let other = mint(&[8; 32]);
        assert!(!token_matches(&other.token, &h));
        assert_ne!(h, t.token, "the hash is not the token");
        for bad in [
            "",
            "tkn_",
            "tkn_0707070707070707",
            "Bearer x",
            &t.token.to_uppercase(),
        ] {
            assert_eq!(token_id_of(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn scopes_are_sets_of_known_names() {
        let s = Scopes::from_names(["search", "ingest"]).unwrap();
        assert_eq!(s.names(), ["ingest", "search"]);
        assert_eq!(Scopes::from_json(&s.to_json()), s);
        assert!(Scopes::from_names(["ingest", "ingest"]).is_none());
        assert!(Scopes::from_names(["admin"]).is_none());
        assert!(Scopes::from_names([]).unwrap().is_empty());
        assert_eq!(
            Scopes::from_json(r#"["search","admin"]"#).names(),
            ["search"]
        );
    }
}
