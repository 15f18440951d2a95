//! Which operations of a document are served: `include` and `exclude` selectors
//! (`operation:ID`, `tag:NAME`, `path:GLOB`, `path:METHOD GLOB`). An operation is served when
//! `include` is empty or one of its selectors matches, and no `exclude` selector matches.
//! In a path glob `*` stands for any characters within one segment and `**` for any
//! characters across segments; the glob is matched against the path template as written in
//! the document (`/products/{id}`).

use anyhow::bail;
use http::Method;

/// One selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Selector {
    Operation(String),
    Tag(String),
    Path { method: Option<Method>, glob: String },
}

/// The parsed `include` and `exclude` of one server, each selector with its text as written
/// (to name one that matches nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    include: Vec<(Selector, String)>,
    exclude: Vec<(Selector, String)>,
}

/// Which selectors of a [`Selection`] matched an operation of a document, `include` first.
#[derive(Debug, Default)]
pub struct Hits(Vec<bool>);

/// What a selector is matched against.
pub struct Candidate<'a> {
    pub operation_id: Option<&'a str>,
    pub tags: &'a [String],
    pub method: &'a Method,
    pub path: &'a str,
}

impl Selection {
    pub fn parse(include: &[String], exclude: &[String]) -> anyhow::Result<Self> {
        let parse_all = |key: &str, items: &[String]| -> anyhow::Result<Vec<(Selector, String)>> {
            items
                .iter()
                .map(|s| {
                    let selector = parse_one(s).map_err(|e| anyhow::anyhow!("{key}: {s:?}: {e}"))?;
                    Ok((selector, s.clone()))
                })
                .collect()
        };
        Ok(Self { include: parse_all("include", include)?, exclude: parse_all("exclude", exclude)? })
    }

    pub fn selects(&self, candidate: &Candidate<'_>) -> bool {
        (self.include.is_empty() || self.include.iter().any(|(s, _)| s.matches(candidate)))
            && !self.exclude.iter().any(|(s, _)| s.matches(candidate))
    }

    /// Marks in `hits` every selector that `candidate` matches (an operation of the document,
    /// whether selected or not).
    pub fn note(&self, candidate: &Candidate<'_>, hits: &mut Hits) {
        let all = self.include.iter().chain(&self.exclude);
        hits.0.resize(self.include.len() + self.exclude.len(), false);
        for (hit, (selector, _)) in hits.0.iter_mut().zip(all) {
            *hit |= selector.matches(candidate);
        }
    }

    /// The selectors, as written (`include: tag:orders`), that matched no operation of the
    /// document `hits` were noted on: a typo or a document that changed, said as a warning.
    pub fn unmatched(&self, hits: &Hits) -> Vec<String> {
        let named =
            self.include.iter().map(|s| ("include", s)).chain(self.exclude.iter().map(|s| ("exclude", s)));
        named
            .enumerate()
            .filter(|(i, _)| !hits.0.get(*i).copied().unwrap_or(false))
            .map(|(_, (key, (_, text)))| format!("{key}: {text}"))
            .collect()
    }
}

fn parse_one(text: &str) -> anyhow::Result<Selector> {
    let Some((kind, rest)) = text.split_once(':') else {
        bail!("a selector is operation:ID, tag:NAME, path:GLOB or path:METHOD GLOB");
    };
    let rest = rest.trim();
    if rest.is_empty() {
        bail!("nothing after {kind}:");
    }
    Ok(match kind {
        "operation" => Selector::Operation(rest.to_string()),
        "tag" => Selector::Tag(rest.to_string()),
        "path" => match rest.split_once(' ') {
            Some((method, glob)) => {
                let method = Method::from_bytes(method.to_ascii_uppercase().as_bytes())?;
                if !glob.trim().starts_with('/') {
                    bail!("a path glob starts with /");
                }
                Selector::Path { method: Some(method), glob: glob.trim().to_string() }
            }
            None if rest.starts_with('/') => Selector::Path { method: None, glob: rest.to_string() },
            None => bail!("a path glob starts with /"),
        },
        other => bail!("unknown selector kind {other:?} (operation, tag or path)"),
    })
}

impl Selector {
    fn matches(&self, c: &Candidate<'_>) -> bool {
        match self {
            Selector::Operation(id) => c.operation_id == Some(id.as_str()),
            Selector::Tag(tag) => c.tags.iter().any(|t| t == tag),
            Selector::Path { method, glob } => {
                method.as_ref().is_none_or(|m| m == c.method)
                    && glob_matches(glob.as_bytes(), c.path.as_bytes())
            }
        }
    }
}

/// `*`: any bytes but `/`; `**`: any bytes. Iterative with one backtrack point per star kind,
/// so a hostile glob cannot make matching exponential.
fn glob_matches(glob: &[u8], path: &[u8]) -> bool {
    match glob {
        [] => path.is_empty(),
        [b'*', b'*', rest @ ..] => (0..=path.len()).any(|i| glob_matches(rest, &path[i..])),
        [b'*', rest @ ..] => {
            let segment = path.iter().position(|&b| b == b'/').unwrap_or(path.len());
            (0..=segment).any(|i| glob_matches(rest, &path[i..]))
        }
        [g, rest @ ..] => path.first() == Some(g) && glob_matches(rest, &path[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate<'a>(
        id: Option<&'a str>,
        tags: &'a [String],
        method: &'a Method,
        path: &'a str,
    ) -> Candidate<'a> {
        Candidate { operation_id: id, tags, method, path }
    }

    #[test]
    fn globs_match_segments_and_across() {
        assert!(glob_matches(b"/products/*", b"/products/{id}"));
        assert!(!glob_matches(b"/products/*", b"/products/{id}/reviews"));
        assert!(glob_matches(b"/products/**", b"/products/{id}/reviews"));
        assert!(glob_matches(b"/**/reviews", b"/products/{id}/reviews"));
        assert!(!glob_matches(b"/orders/*", b"/products/1"));
    }

    #[test]
    fn include_then_exclude() {
        let tags = vec!["catalogue".to_string()];
        let get = Method::GET;
        let delete = Method::DELETE;
        let selection = Selection::parse(
            &["tag:catalogue".into(), "operation:createOrder".into()],
            &["path:DELETE /products/**".into()],
        )
        .unwrap();
        assert!(selection.selects(&candidate(Some("getProduct"), &tags, &get, "/products/{id}")));
        assert!(!selection.selects(&candidate(Some("deleteProduct"), &tags, &delete, "/products/{id}")));
        assert!(selection.selects(&candidate(Some("createOrder"), &[], &Method::POST, "/orders")));
        assert!(!selection.selects(&candidate(None, &[], &get, "/health")));
        assert!(Selection::default().selects(&candidate(None, &[], &get, "/health")));
        assert!(Selection::parse(&["products".into()], &[]).is_err());
        assert!(Selection::parse(&["path:products".into()], &[]).is_err());
        assert!(Selection::parse(&["kind:x".into()], &[]).is_err());
    }

    #[test]
    fn selectors_that_match_no_operation_are_named() {
        let tags = vec!["catalogue".to_string()];
        let selection = Selection::parse(
            &["tag:catalogue".into(), "tag:catalog".into()],
            &["path:DELETE /products/**".into(), "operation:nope".into()],
        )
        .unwrap();
        let mut hits = Hits::default();
        selection.note(&candidate(Some("getProduct"), &tags, &Method::GET, "/products/{id}"), &mut hits);
        selection
            .note(&candidate(Some("deleteProduct"), &tags, &Method::DELETE, "/products/{id}"), &mut hits);
        assert_eq!(selection.unmatched(&hits), vec!["include: tag:catalog", "exclude: operation:nope"]);
        assert!(Selection::default().unmatched(&Hits::default()).is_empty());
        // A document with no operation at all: every selector is unmatched.
        assert_eq!(selection.unmatched(&Hits::default()).len(), 4);
    }
}
