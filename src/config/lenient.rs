//! Deserializers for string settings that also accept numbers and booleans.
//!
//! Environment overrides are read as TOML when they parse as TOML, so
//! `MCP_GATEWAY_SERVERS__X__QUALIFIER=7` (a Lambda version) arrives as the integer 7. The
//! overlay cannot know the type a key expects; string settings therefore take a number or a
//! boolean as its text (`7` → `"7"`), so nothing an operator can write in an environment
//! variable is refused for looking numeric.

use std::{collections::BTreeMap, fmt};

use serde::{
    Deserialize, Deserializer,
    de::{self, Visitor},
};

/// A string, or a number/boolean taken as its text.
struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl Visitor<'_> for TextVisitor {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string (numbers and booleans are taken as their text)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text, E> {
                Ok(Text(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
        }
        deserializer.deserialize_any(TextVisitor)
    }
}

pub fn string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Text::deserialize(deserializer).map(|t| t.0)
}

pub fn opt_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Option::<Text>::deserialize(deserializer).map(|t| t.map(|t| t.0))
}

pub fn strings<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    Vec::<Text>::deserialize(deserializer).map(|v| v.into_iter().map(|t| t.0).collect())
}

/// One string or a list of them (`audience = "a"` or `audience = ["a", "b"]`).
pub fn one_or_more_strings<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMore {
        One(Text),
        More(Vec<Text>),
    }
    Ok(match OneOrMore::deserialize(deserializer)? {
        OneOrMore::One(one) => vec![one.0],
        OneOrMore::More(more) => more.into_iter().map(|t| t.0).collect(),
    })
}

pub fn string_map<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, String>, D::Error> {
    BTreeMap::<String, Text>::deserialize(deserializer)
        .map(|m| m.into_iter().map(|(k, t)| (k, t.0)).collect())
}
