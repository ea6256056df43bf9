//! What the Worker serves without credentials besides `/healthz`: the
//! operator's console (`GET /console`, its script and style sheet, from
//! `console/`) and the API's contract (`GET /openapi.json`, from
//! `docs/openapi.json`, which `make openapi` writes from
//! `docs/openapi.yaml`). All embedded at build time; none holds a secret.
//! The console signs in with the admin token in the browser and calls the
//! admin API like any client.
//!
//! May import: `super` (errors).

use super::{method_not_allowed, ApiError, GET_HEAD};

/// A static response: its status, type, extra headers and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asset {
    pub content_type: &'static str,
    pub headers: &'static [(&'static str, &'static str)],
    pub body: &'static str,
}

/// The console's policy: its own script, style and API only; no inline
/// script or style, no frames, no forms posted elsewhere.
pub const CONSOLE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const CONSOLE_HEADERS: &[(&str, &str)] = &[
    ("Content-Security-Policy", CONSOLE_CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cache-Control", "no-cache"),
];

const CONTRACT_HEADERS: &[(&str, &str)] = &[
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-cache"),
    ("Access-Control-Allow-Origin", "*"),
];

const INDEX_HTML: &str = include_str!("../../console/index.html");
const CONSOLE_JS: &str = include_str!("../../console/console.js");
const CONSOLE_CSS: &str = include_str!("../../console/console.css");
const OPENAPI_JSON: &str = include_str!("../../docs/openapi.json");

/// The asset at `path` (its query string ignored) for `method`: `None` if
/// `path` is not an asset's, `Some(Err(405))` for a method other than GET
/// or HEAD.
pub fn asset(method: &str, path: &str) -> Option<Result<Asset, ApiError>> {
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    let (content_type, headers, body) = match path {
        "/console" | "/console/" => ("text/html; charset=utf-8", CONSOLE_HEADERS, INDEX_HTML),
        "/console/console.js" => (
            "text/javascript; charset=utf-8",
            CONSOLE_HEADERS,
            CONSOLE_JS,
        ),
        "/console/console.css" => ("text/css; charset=utf-8", CONSOLE_HEADERS, CONSOLE_CSS),
        "/openapi.json" => ("application/json", CONTRACT_HEADERS, OPENAPI_JSON),
        _ => return None,
    };
    Some(match method {
        "GET" | "HEAD" => Ok(Asset {
            content_type,
            headers,
            body,
        }),
        _ => Err(method_not_allowed(GET_HEAD)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_console_and_the_contract_are_served_and_nothing_else() {
        for path in [
            "/console",
            "/console/",
            "/console/console.js",
            "/console/console.css",
            "/openapi.json",
        ] {
            let got = asset("GET", path).and_then(Result::ok);
            assert!(got.is_some_and(|a| !a.body.is_empty()), "{path} is served");
            assert!(
                matches!(asset("POST", path), Some(Err(e)) if e.status == 405 && e.allow == Some("GET, HEAD")),
                "POST {path} is 405"
            );
        }
        assert_eq!(asset("GET", "/console/other.js"), None);
        assert_eq!(asset("GET", "/v1/documents/x"), None);
    }

    #[test]
    fn the_console_runs_no_inline_code_and_embeds_no_token() {
        assert!(CONSOLE_CSP.contains("script-src 'self'"));
        assert!(!CONSOLE_CSP.contains("unsafe"));
        // Scripts and styles come from files, never inline in the page.
        assert!(!INDEX_HTML.contains("<script>"));
        assert!(!INDEX_HTML.contains("<style"));
        assert!(!INDEX_HTML.contains(" style="));
        assert!(!has_event_attribute(INDEX_HTML), "no inline event handlers");
        // Values are set as text, never as markup.
        assert!(!CONSOLE_JS.contains("innerHTML"));
        for secret in ["dev-admin-token", "dev-ingest-token"] {
            assert!(!CONSOLE_JS.contains(secret), "{secret} in the console");
            assert!(!INDEX_HTML.contains(secret), "{secret} in the console");
        }
    }

    /// An attribute such as ` onclick=` in `html`.
    fn has_event_attribute(html: &str) -> bool {
        html.match_indices(" on").any(|(i, _)| {
            let rest = html.get(i + 3..).unwrap_or("");
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_lowercase())
                .collect();
            !name.is_empty() && rest.get(name.len()..).is_some_and(|r| r.starts_with('='))
        })
    }

    #[test]
    fn an_event_attribute_is_seen() {
        assert!(has_event_attribute("<a onclick=\"x()\">"));
        assert!(!has_event_attribute("<p>only one</p>"));
    }

    #[test]
    fn the_served_contract_is_json() {
        let v: serde_json::Value = serde_json::from_str(OPENAPI_JSON).expect("JSON");
        assert_eq!(v["openapi"], "3.1.0");
    }
}
