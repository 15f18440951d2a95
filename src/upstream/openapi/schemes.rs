//! The document's security schemes satisfied from `[servers.NAME.security.SCHEME]`: where
//! each secret goes (a header, the query, a cookie; HTTP bearer and basic), as a sensitive
//! header value, and errors that never show the secret.

use base64::Engine;
use http::{HeaderName, HeaderValue, header};
use serde_json::Value;

use crate::{
    openapi,
    upstream::{CredentialFailure, UpstreamError},
};

/// Schemes a bearer token from `auth` satisfies.
pub(super) fn is_token_scheme(scheme: &Value) -> bool {
    match scheme.get("type").and_then(Value::as_str) {
        Some("oauth2" | "openIdConnect") => true,
        Some("http") => {
            scheme.get("scheme").and_then(Value::as_str).is_some_and(|s| s.eq_ignore_ascii_case("bearer"))
        }
        _ => false,
    }
}

/// One scheme's credential on the request.
pub(super) enum SchemeValue {
    Header(HeaderName, HeaderValue),
    Query(String, String),
    Cookie(String, String),
}

pub(super) fn sensitive(text: String) -> Result<HeaderValue, UpstreamError> {
    let mut value = HeaderValue::try_from(text).map_err(|_| UpstreamError::Credentials {
        failure: CredentialFailure::NotConfigured,
        detail: "a configured secret is not a valid header value".into(),
    })?;
    value.set_sensitive(true);
    Ok(value)
}

pub(super) fn scheme_value(
    name: &str,
    scheme: &Value,
    (username, secret): &(Option<String>, String),
) -> Result<SchemeValue, UpstreamError> {
    let unusable =
        |why: String| UpstreamError::Credentials { failure: CredentialFailure::Unavailable, detail: why };
    match scheme.get("type").and_then(Value::as_str) {
        Some("apiKey") => {
            let key = scheme
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| unusable(format!("security scheme {name} has no `name`")))?;
            match scheme.get("in").and_then(Value::as_str) {
                Some("header") => {
                    let header = HeaderName::try_from(key).map_err(|_| {
                        unusable(format!("security scheme {name}: {key:?} is not a header name"))
                    })?;
                    Ok(SchemeValue::Header(header, sensitive(secret.clone())?))
                }
                Some("query") => Ok(SchemeValue::Query(key.to_string(), secret.clone())),
                Some("cookie") => {
                    Ok(SchemeValue::Cookie(openapi::request::encode(key), openapi::request::encode(secret)))
                }
                other => Err(unusable(format!("security scheme {name}: apiKey in {other:?} is not served"))),
            }
        }
        Some("http")
            if scheme
                .get("scheme")
                .and_then(Value::as_str)
                .is_some_and(|s| s.eq_ignore_ascii_case("basic")) =>
        {
            let user = username.as_deref().unwrap_or("");
            let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{secret}"));
            Ok(SchemeValue::Header(header::AUTHORIZATION, sensitive(format!("Basic {encoded}"))?))
        }
        // HTTP bearer, OAuth 2 and OpenID Connect with a configured token: a bearer header.
        _ => Ok(SchemeValue::Header(header::AUTHORIZATION, sensitive(format!("Bearer {secret}"))?)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn header_of(value: SchemeValue) -> (String, String) {
        match value {
            SchemeValue::Header(name, value) => {
                assert!(value.is_sensitive(), "secrets are sensitive header values");
                (name.to_string(), value.to_str().unwrap().to_string())
            }
            _ => panic!("not a header"),
        }
    }

    #[test]
    fn schemes_put_their_secret_where_the_document_says() {
        let secret = (None, "s3cret".to_string());
        let header = json!({"type": "apiKey", "in": "header", "name": "X-API-Key"});
        assert_eq!(
            header_of(scheme_value("k", &header, &secret).unwrap()),
            ("x-api-key".into(), "s3cret".into())
        );
        let query = json!({"type": "apiKey", "in": "query", "name": "api_key"});
        assert!(
            matches!(scheme_value("k", &query, &secret).unwrap(), SchemeValue::Query(n, v) if n == "api_key" && v == "s3cret")
        );
        let cookie = json!({"type": "apiKey", "in": "cookie", "name": "session id"});
        assert!(
            matches!(scheme_value("k", &cookie, &secret).unwrap(), SchemeValue::Cookie(n, v) if n == "session%20id" && v == "s3cret")
        );
        let basic = json!({"type": "http", "scheme": "Basic"});
        let user = (Some("gateway".to_string()), "pw".to_string());
        assert_eq!(header_of(scheme_value("b", &basic, &user).unwrap()).1, "Basic Z2F0ZXdheTpwdw==");
        let bearer = json!({"type": "http", "scheme": "bearer"});
        assert_eq!(header_of(scheme_value("t", &bearer, &secret).unwrap()).1, "Bearer s3cret");
        assert!(is_token_scheme(&bearer) && is_token_scheme(&json!({"type": "oauth2"})));
        assert!(!is_token_scheme(&basic) && !is_token_scheme(&header));
        let nowhere = json!({"type": "apiKey", "in": "body", "name": "k"});
        assert!(matches!(scheme_value("k", &nowhere, &secret), Err(UpstreamError::Credentials { .. })));
        let broken = (None, "line\nbreak".to_string());
        let Err(UpstreamError::Credentials { detail, .. }) = scheme_value("t", &bearer, &broken) else {
            panic!()
        };
        assert!(!detail.contains("line"), "the error never shows the secret: {detail}");
    }
}
