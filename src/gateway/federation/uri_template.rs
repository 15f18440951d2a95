//! Whether a URI is one a server's RFC 6570 URI template can expand to: the resource index
//! routes a `resources/read` for a URI no server listed to the server whose template matches.
//!
//! Matching is structural: literal text must be there as written, and each expression covers
//! a run of characters its operator can produce — simple `{x}` unreserved characters,
//! percent-escapes and commas; `{+x}` anything but `#`; `{#x}` a fragment; `{.x}` labels;
//! `{/x}` path segments; `{;x}` path parameters; `{?x}`/`{&x}` a query. Values are not
//! extracted (the server expands and reads them itself). Every operator may also expand to
//! nothing (an undefined variable), as RFC 6570 says.

use crate::resource_uri::CanonicalUri;
pub use crate::resource_uri::MAX_URI_BYTES;

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Expression(Operator),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Simple,
    Reserved,
    Fragment,
    Label,
    Path,
    PathParameter,
    Query,
    QueryContinuation,
}

impl UriTemplate {
    /// Parses `text`; an unclosed or empty expression, or a nested `{`, is an error.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            match rest.find('{') {
                Some(0) => {
                    let end = rest.find('}').ok_or_else(|| format!("unclosed expression in {text:?}"))?;
                    let body = &rest[1..end];
                    if body.is_empty() || body.contains('{') {
                        return Err(format!("malformed expression {{{body}}} in {text:?}"));
                    }
                    parts.push(Part::Expression(Operator::of(body)));
                    rest = &rest[end + 1..];
                }
                Some(start) => {
                    parts.push(Part::Literal(rest[..start].to_string()));
                    rest = &rest[start..];
                }
                None => {
                    if rest.contains('}') {
                        return Err(format!("unopened expression in {text:?}"));
                    }
                    parts.push(Part::Literal(rest.to_string()));
                    rest = "";
                }
            }
        }
        // URIs are matched in their canonical form: the scheme and host in lower case.
        if let Some(Part::Literal(head)) = parts.first_mut() {
            *head = lower_scheme_and_host(head);
        }
        Ok(Self { parts })
    }

    /// The literal text every expansion starts with (before the first expression).
    pub fn head(&self) -> &str {
        match self.parts.first() {
            Some(Part::Literal(text)) => text,
            _ => "",
        }
    }

    /// Whether `uri` (in its canonical form: a template is matched against what the server
    /// will be sent) is an expansion of this template.
    pub fn matches(&self, uri: &CanonicalUri) -> bool {
        self.matches_text(uri.as_str())
    }

    fn matches_text(&self, uri: &str) -> bool {
        if uri.len() > MAX_URI_BYTES {
            return false;
        }
        // Positions of `uri` reachable after each part (a set per part: no backtracking blow-up).
        let mut reachable = vec![false; uri.len() + 1];
        reachable[0] = true;
        for part in &self.parts {
            let mut next = vec![false; uri.len() + 1];
            // Where the last scan of this expression stopped: a later start below it reaches
            // no end the earlier one did not mark (what a character admits does not depend on
            // where the expansion started), so each character is scanned about once.
            let mut scanned_to = 0;
            for start in (0..=uri.len()).filter(|&p| reachable[p]) {
                match part {
                    Part::Literal(text) => {
                        if uri[start..].starts_with(text.as_str()) {
                            next[start + text.len()] = true;
                        }
                    }
                    Part::Expression(operator) if operator.lead().is_none() && start < scanned_to => {
                        next[start] = true;
                    }
                    Part::Expression(operator) => scanned_to = operator.spans(uri, start, &mut next),
                }
            }
            reachable = next;
        }
        reachable[uri.len()]
    }
}

/// `literal` (a template's leading text) with its scheme and its host's written part in lower
/// case, as a canonical URI has them (`crate::resource_uri`).
fn lower_scheme_and_host(literal: &str) -> String {
    let Some(colon) = literal.find(':') else { return literal.to_string() };
    if literal[..colon].contains(['/', '?', '#']) {
        return literal.to_string();
    }
    let end = match literal[colon + 1..].strip_prefix("//") {
        Some(authority) => colon + 3 + authority.find(['/', '?', '#']).unwrap_or(authority.len()),
        None => colon,
    };
    format!("{}{}", literal[..end].to_ascii_lowercase(), &literal[end..])
}

impl Operator {
    fn of(body: &str) -> Self {
        match body.as_bytes()[0] {
            b'+' => Operator::Reserved,
            b'#' => Operator::Fragment,
            b'.' => Operator::Label,
            b'/' => Operator::Path,
            b';' => Operator::PathParameter,
            b'?' => Operator::Query,
            b'&' => Operator::QueryContinuation,
            _ => Operator::Simple,
        }
    }

    /// The character an expansion of this operator starts with, when it is not empty.
    fn lead(self) -> Option<char> {
        match self {
            Operator::Simple | Operator::Reserved => None,
            Operator::Fragment => Some('#'),
            Operator::Label => Some('.'),
            Operator::Path => Some('/'),
            Operator::PathParameter => Some(';'),
            Operator::Query => Some('?'),
            Operator::QueryContinuation => Some('&'),
        }
    }

    /// Whether `c` may stand in an expansion (after its lead character).
    fn admits(self, c: char) -> bool {
        let unreserved = c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~' | '%' | ',');
        match self {
            Operator::Simple => unreserved,
            Operator::Reserved | Operator::Fragment => c != '#' || self == Operator::Fragment,
            Operator::Label => unreserved,
            Operator::Path => unreserved || c == '/',
            Operator::PathParameter => unreserved || matches!(c, ';' | '='),
            Operator::Query | Operator::QueryContinuation => c != '#',
        }
    }

    /// Marks in `ends` every end of an expansion of this operator starting at `start`;
    /// returns where the scan stopped (the first character it cannot cover, or the end).
    fn spans(self, uri: &str, start: usize, ends: &mut [bool]) -> usize {
        ends[start] = true; // an undefined variable expands to nothing
        let mut chars = uri[start..].char_indices();
        if let Some(lead) = self.lead() {
            match chars.next() {
                Some((_, c)) if c == lead => {}
                _ => return start,
            }
            ends[start + lead.len_utf8()] = true;
        }
        for (offset, c) in chars {
            if !self.admits(c) {
                return start + offset;
            }
            ends[start + offset + c.len_utf8()] = true;
        }
        uri.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(template: &str, uri: &str) -> bool {
        UriTemplate::parse(template).unwrap().matches_text(uri)
    }

    #[test]
    fn simple_expressions_cover_one_segment_and_literals_must_be_there() {
        assert!(matches("manga://catalog/{id}", "manga://catalog/MNG-00000001"));
        assert!(!matches("manga://catalog/{id}", "manga://catalog/a/b"), "a simple value has no '/'");
        assert!(!matches("manga://catalog/{id}", "manga://cart/MNG-1"));
        assert!(matches("test://static/resource/{id}", "test://static/resource/42"));
        assert!(matches("file:///{+path}", "file:///home/user/notes.txt"), "reserved: slashes too");
        assert!(matches("users/{id}/orders{?page,limit}", "users/7/orders?page=2&limit=10"));
        assert!(matches("users/{id}/orders{?page,limit}", "users/7/orders"), "an undefined query is empty");
        assert!(matches("doc{#section}", "doc#intro"));
        assert!(matches("{/a,b}", "/x/y"));
        assert!(matches("x{.ext}", "x.json"));
        assert!(!matches("x{.ext}", "x.json/more"));
    }

    #[test]
    fn malformed_templates_are_refused() {
        assert!(UriTemplate::parse("a/{id").is_err());
        assert!(UriTemplate::parse("a/{}").is_err());
        assert!(UriTemplate::parse("a/id}").is_err());
        assert!(UriTemplate::parse("a/{{id}}").is_err());
    }

    #[test]
    fn a_long_uri_is_matched_in_bounded_work_and_an_over_long_one_not_at_all() {
        let template = UriTemplate::parse("{+a}{+b}{+c}{+d}/end").unwrap();
        let uri = format!("{}/end", "x".repeat(MAX_URI_BYTES - 4));
        assert!(template.matches_text(&uri));
        assert!(!template.matches_text(&format!("{}/end", "x".repeat(MAX_URI_BYTES))));
        assert_eq!(template.head(), "");
        assert_eq!(UriTemplate::parse("manga://catalog/{id}").unwrap().head(), "manga://catalog/");
    }

    #[test]
    fn a_templates_scheme_and_host_are_matched_as_canonical_uris_have_them() {
        let uri = |text: &str| CanonicalUri::parse(text).unwrap();
        let template = UriTemplate::parse("Manga://Catalog/Books/{id}").unwrap();
        assert_eq!(template.head(), "manga://catalog/Books/", "the path keeps its case");
        assert!(template.matches(&uri("MANGA://catalog/Books/7")));
        assert!(!template.matches(&uri("manga://catalog/books/7")));
        assert_eq!(UriTemplate::parse("X://Host{/path}").unwrap().head(), "x://host");
        assert_eq!(UriTemplate::parse("Urn:Isbn:{n}").unwrap().head(), "urn:Isbn:");
    }
}
